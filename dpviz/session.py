"""What one page session holds: its own recent runs, so the same settings rerun from memory.

Each browser session gets its own `Runs`; nothing is shared between sessions, so one visitor never
sees another's runs or uploads, and memory is bounded per session.
"""
from __future__ import annotations

from collections import OrderedDict

from .config import ConfigError, RunConfig
from .recorder import Progress, cuda_device_count, record, resolve_backend
from .trace import Trace


class Runs:
    """A small least-recently-used store of traces keyed by their settings."""

    def __init__(self, capacity: int = 3):
        self.capacity = capacity
        self._traces: OrderedDict[RunConfig, Trace] = OrderedDict()

    def __contains__(self, config: RunConfig) -> bool:
        return config in self._traces

    def get(self, config: RunConfig, progress: Progress | None = None) -> Trace:
        """The trace for `config`, recorded now only if this session has not run it recently."""
        if config in self._traces:
            self._traces.move_to_end(config)
            return self._traces[config]
        trace = record(config, progress)
        self._traces[config] = trace
        while len(self._traces) > self.capacity:
            self._traces.popitem(last=False)
        return trace


def runnable(config: RunConfig, available: int | None = None) -> tuple[RunConfig, str | None]:
    """`config`, or the simulated equivalent with a sentence saying why, when its backend can't run here."""
    try:
        resolve_backend(config, available)
    except ConfigError as error:
        fallback = RunConfig(**{**config.to_dict(), "backend": "simulated"})
        return fallback, f"{str(error)[:-1].split(';')[0]}, so simulated devices are shown instead."
    return config, None


def describe_devices(trace: Trace, machine_gpus: int | None = None) -> str:
    """One sentence: real or simulated devices, which ones, and what the viewing machine has."""
    here = cuda_device_count() if machine_gpus is None else machine_gpus
    here_text = f"this machine has {here} CUDA GPU{'s' if here != 1 else ''}"
    n = len(trace.lanes)
    if trace.backend == "cuda":
        names = ", ".join(lane.name for lane in trace.lanes)
        return f"Real GPUs: torch.nn.DataParallel ran on {names} ({here_text})."
    return (
        f"Simulated devices: {n} CPU thread{'s' if n != 1 else ''} stand{'s' if n == 1 else ''} in for "
        f"{n} GPU{'s' if n != 1 else ''}, following DataParallel's rules exactly ({here_text})."
    )


class Views:
    """Figures already built for recent traces, so a rerun that shows one again draws at once."""

    def __init__(self, capacity: int = 64):
        self.capacity = capacity
        # Each entry keeps its trace alive, so the trace's id() can't be reused while it is cached.
        self._built: OrderedDict[tuple, tuple[Trace, object]] = OrderedDict()

    def get(self, trace: Trace, build, *args):
        """`build(trace, *args)`, from memory when this trace's figure was built before."""
        key = (id(trace), build.__name__, args)
        if key not in self._built:
            self._built[key] = (trace, build(trace, *args))
            while len(self._built) > self.capacity:
                self._built.popitem(last=False)
        self._built.move_to_end(key)
        return self._built[key][1]
