"""What one page session holds: its own recent runs, so the same settings rerun from memory.

Each browser session gets its own `Runs`; nothing is shared between sessions, so one visitor never
sees another's runs or uploads, and memory is bounded per session.
"""
from __future__ import annotations

import contextlib
import gc
import sys
import threading
import time
import weakref
from collections import OrderedDict
from typing import Callable, Iterator

from dpviz.config import RunConfig
from dpviz.engines.base import Progress
from dpviz.engines.apart import record_apart
from dpviz.engines.run import cuda_device_count, resolve
from dpviz.page.warm_runs import KeptProcess, end_idle_oldest, small
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
    """A small least-recently-used store of traces keyed by their settings. Every session's store is also seen
    server-wide (`let_go_oldest`), so that a run waiting for memory can have the least recently used trace of
    any session let go: that session records it again if it shows it again."""

    def __init__(self, capacity: int = 3):
        self.capacity = capacity
        self._traces: OrderedDict[RunConfig, Trace] = OrderedDict()
        self._used: dict[RunConfig, float] = {}
        self._lock = threading.Lock()  # another session's thread may let one of these go
        self._kept = KeptProcess()  # small runs go to a process kept for the session, which ends with it
        weakref.finalize(self, self._kept.close)
        _EVERY.add(self)

    def __contains__(self, config: RunConfig) -> bool:
        return resolve(config) in self._traces

    def get(self, config: RunConfig, progress: Progress | None = None,
            still_wanted: Callable[[], None] | None = None) -> Trace:
        """The trace for `config`, recorded now (in a process of its own: dpviz.engines.apart) only if this
        session has not run it recently; whatever `still_wanted()` raises ends that run and its process."""
        config = resolve(config)  # "auto" and what it resolves to are the same run
        with self._lock:
            if config in self._traces:
                self._traces.move_to_end(config)
                self._used[config] = time.monotonic()
                return self._traces[config]
            # Make room before recording, so a heavy run never shares memory with older heavy runs.
            while self._traces and (len(self._traces) >= self.capacity
                                    or sum(map(_weight, self._traces)) + _weight(config) > MAX_KEPT_SPANS):
                self._let_go(next(iter(self._traces)))
        record = self._kept.record if small(config) else record_apart
        trace = record(config, progress, still_wanted, machine_gpus=cuda_device_count())
        with self._lock:
            self._traces[config] = trace
            self._used[config] = time.monotonic()
        return trace

    def _let_go(self, config: RunConfig) -> None:
        del self._traces[config]
        del self._used[config]

    def oldest(self) -> tuple[float, RunConfig] | None:
        with self._lock:
            return min(((used, config) for config, used in self._used.items()), key=lambda pair: pair[0], default=None)

    def let_go(self, config: RunConfig) -> bool:
        with self._lock:
            if config not in self._traces:
                return False
            self._let_go(config)
            return True


_EVERY: "weakref.WeakSet[Runs]" = weakref.WeakSet()  # every live session's store (a closed session's goes with it)


def let_go_oldest() -> bool:
    """End the least recently used idle process a session keeps for its small runs, else let go of the least
    recently shown trace any session keeps (True if there was either), and collect it now, so that what the
    server holds, measured next, is smaller."""
    if end_idle_oldest():
        return True
    candidates = [(found[0], runs, found[1]) for runs in list(_EVERY) if (found := runs.oldest()) is not None]
    for _, runs, config in sorted(candidates, key=lambda found: found[0]):
        if runs.let_go(config):
            gc.collect()
            return True
    return False


# Spans a session's stored runs may hold together: about one largest run (10,000 batches on 16
# devices). What all sessions keep together is bounded by the server's memory budget, which lets the
# least recently shown go first when a run needs the room (let_go_oldest).
MAX_KEPT_SPANS = 200_000


def _weight(config: RunConfig) -> int:
    """Roughly how many spans a run of `config` records: a forward (and backward) per device, plus host phases."""
    return config.num_batches * (config.gpus * (2 if config.train else 1) + 6)


class Views:
    """Figures already built for the session's recent traces, so a rerun that shows one again draws at once.
    A trace is held weakly: one its session's store has let go takes its figures with it."""

    def __init__(self, traces: int = 3):
        self.traces = traces
        # id(trace) -> (a weak reference to it, its figures); an id whose trace has gone may be reused, so an
        # entry counts only while its reference still gives that same trace.
        self._built: OrderedDict[int, tuple[weakref.ref, dict[tuple, object]]] = OrderedDict()

    def get(self, trace: Trace, build, *args):
        """`build(trace, *args)`, from memory when this trace's figure was built before."""
        entry = self._built.get(id(trace))
        if entry is None or entry[0]() is not trace:
            entry = self._built[id(trace)] = (weakref.ref(trace), {})
        self._built.move_to_end(id(trace))
        for key in [key for key, (ref, _) in self._built.items() if ref() is None]:
            del self._built[key]
        while len(self._built) > self.traces:
            self._built.popitem(last=False)
        figures = entry[1]
        key = (build.__name__, args)
        if key not in figures:
            figures[key] = build(trace, *args)
        return figures[key]
