"""What one page session holds: its own recent runs, so the same settings rerun from memory.

Each browser session gets its own `Runs`; nothing is shared between sessions, so one visitor never
sees another's runs or uploads, and memory is bounded per session.
"""
from __future__ import annotations

import contextlib
import sys
import threading
from collections import OrderedDict
from typing import Iterator

from dpviz.config import RunConfig
from dpviz.engines.base import Progress
from dpviz.engines.run import record, resolve
from dpviz.trace import Trace


# plotly, turning a figure into JSON, asks sys.modules whether pandas is loaded and uses it if so; while one
# session's thread imports pandas (the first Split or Timeline the server draws), another's would find it
# half-loaded and fail ("partially initialized module 'pandas' has no attribute 'Series'"), as ten visitors
# at once did. Until pandas is whole, pages draw one at a time; after that (nothing imports it again) they
# draw side by side as before. Runs never wait for it.
DRAWING = threading.RLock()


def _whole(name: str) -> bool:
    module = sys.modules.get(name)
    return module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False)


@contextlib.contextmanager
def drawing() -> Iterator[None]:
    """Draw a page: alone while pandas may still be half-imported by another session, freely after."""
    if _whole("pandas"):
        yield
        return
    with DRAWING:
        yield


class Runs:
    """A small least-recently-used store of traces keyed by their settings."""

    def __init__(self, capacity: int = 3):
        self.capacity = capacity
        self._traces: OrderedDict[RunConfig, Trace] = OrderedDict()

    def __contains__(self, config: RunConfig) -> bool:
        return resolve(config) in self._traces

    def get(self, config: RunConfig, progress: Progress | None = None) -> Trace:
        """The trace for `config`, recorded now only if this session has not run it recently."""
        config = resolve(config)  # "auto" and what it resolves to are the same run
        if config in self._traces:
            self._traces.move_to_end(config)
            return self._traces[config]
        # Make room before recording, so a heavy run never shares memory with older heavy runs.
        while self._traces and (len(self._traces) >= self.capacity
                                or sum(map(_weight, self._traces)) + _weight(config) > MAX_KEPT_SPANS):
            self._traces.popitem(last=False)
        trace = record(config, progress)
        self._traces[config] = trace
        return trace


# Spans a session's stored runs may hold together: about one largest run (10,000 batches on 16
# devices), which is what a 690 MB host has room for.
MAX_KEPT_SPANS = 200_000


def _weight(config: RunConfig) -> int:
    """Roughly how many spans a run of `config` records: a forward (and backward) per device, plus host phases."""
    return config.num_batches * (config.gpus * (2 if config.train else 1) + 6)


class Views:
    """Figures already built for the session's recent traces, so a rerun that shows one again draws at once."""

    def __init__(self, traces: int = 3):
        self.traces = traces
        # id(trace) -> (trace, its figures). Each entry keeps its trace alive, so the id can't be reused
        # while cached; only the last few traces are kept, so old ones are freed with their figures.
        self._built: OrderedDict[int, tuple[Trace, dict[tuple, object]]] = OrderedDict()

    def get(self, trace: Trace, build, *args):
        """`build(trace, *args)`, from memory when this trace's figure was built before."""
        _, figures = self._built.setdefault(id(trace), (trace, {}))
        self._built.move_to_end(id(trace))
        while len(self._built) > self.traces:
            self._built.popitem(last=False)
        key = (build.__name__, args)
        if key not in figures:
            figures[key] = build(trace, *args)
        return figures[key]
