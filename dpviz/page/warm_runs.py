"""A session's process kept for its small runs, priced in the server's memory budget for as long as it lives.

    kept = KeptProcess()
    if small(config): trace = kept.record(config, progress, still_wanted, machine_gpus=...)
    end_idle_oldest()      # the budget needs room: the least recently used idle kept process of any session ends

A new run at the tutorial's settings in a fresh fork of the forkserver spends most of its time forking and
tearing the process down (dpviz.engines.warm); kept for the session, the same run takes a few milliseconds. What
the process holds between runs (its own pages: about 11 MB after the tutorial's run, 14 MB after thirty) is held
in the budget at the price of the dearest run it has served (25 MB for the tutorial's), from that run's end until
the process ends: when its session ends, when it has waited dpviz.engines.warm.IDLE_S for a run, or when a run
needs the room (`end_idle_oldest`, before any session's kept trace is let go).
"""
from __future__ import annotations

import threading
import time
import weakref
from typing import Callable

from dpviz.config import RunConfig
from dpviz.engines import ENGINES
from dpviz.engines.base import Progress
from dpviz.engines.warm import WarmProcess
from dpviz.page.budget import BUDGET
from dpviz.page.run_costs import price
from dpviz.trace import Trace

WATCH_S = 1.0  # how often the server looks for kept processes whose page session has closed

# Spans a run may record and still go to the session's kept process: the tutorial's records 56, the largest page
# thousands of times more. A small run leaves little in the process's heap, and what it leaves is priced.
MOST_SPANS = 2_000


def small(config: RunConfig) -> bool:
    """Whether `config` is a run for the session's kept process: one process (no ranks), and few spans."""
    lanes = config.gpus * (2 if config.train else 1) + 6
    return not ENGINES[config.engine].processes and config.num_batches * lanes <= MOST_SPANS


class KeptProcess:
    """One session's kept process (dpviz.engines.warm.WarmProcess), its memory held in BUDGET while it lives."""

    def __init__(self, budget=BUDGET):
        self._budget = budget
        self._price = 0
        self.used = 0.0  # when it last ran something (the least recently used ends first)
        self._open: Callable[[], bool] | None = None  # whether its page session is still open, once known
        self._warm = WarmProcess(on_end=self._ended)
        _EVERY.add(self)

    def record(self, config: RunConfig, progress: Progress | None = None,
               still_wanted: Callable[[], None] | None = None, *, machine_gpus: int | None = None) -> Trace:
        if self._open is None:
            self._open = _page_session()
        trace = self._warm.record(config, progress, still_wanted, machine_gpus=machine_gpus)
        self.used = time.monotonic()
        if self._open is not None:
            _watch_sessions()  # once its process is alive: a watch about to leave sees it, or a new one starts
        with _PRICES:
            self._price = max(self._price, price(config))
            self._budget.keep(self, self._price)
            if not self._warm.alive():  # it ended meanwhile (and said so before its price was kept)
                self._ended()
        return trace

    def close(self) -> None:
        """End the process (its session has ended), its price given back at once."""
        self._warm.close()
        self._ended()

    def close_if_idle(self) -> bool:
        """End the process if it runs nothing now (True if it did), its price given back at once: a run making
        room measures the room again straight after, before the process's watch has said it ended."""
        if not self._warm.close_if_idle():
            return False
        self._ended()
        return True

    def alive(self) -> bool:
        return self._warm.alive()

    def session_closed(self) -> bool:
        """Whether the page session it serves has closed (a closed tab): never, outside a page session."""
        return self._open is not None and not self._open()

    @property
    def pid(self) -> int | None:
        return self._warm.pid

    def _ended(self) -> None:
        with _PRICES:
            if self._warm.alive():  # word of an earlier process's end, come after a fresh one took over
                return
            self._price = 0
            self._budget.let_go(self)


_PRICES = threading.RLock()  # a price kept and the process's end never cross
_EVERY: "weakref.WeakSet[KeptProcess]" = weakref.WeakSet()


def _page_session() -> Callable[[], bool] | None:
    """For the page session running this script: whether it is still open (its browser tab), as a function;
    None outside a served page (a test's AppTest, a script)."""
    import sys

    if "streamlit" not in sys.modules:
        return None
    from streamlit.runtime import Runtime
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    context = get_script_run_ctx(suppress_warning=True)
    if context is None or not Runtime.exists():
        return None
    session, runtime = context.session_id, Runtime.instance()
    return lambda: runtime.is_active_session(session)


_watching = threading.Lock()
_watcher: list[threading.Thread] = []


def _watch_sessions() -> None:
    """Start the server's one thread that ends the kept processes of closed page sessions, if it is not running."""
    with _watching:
        if _watcher and _watcher[0].is_alive():
            return
        _watcher[:] = [threading.Thread(target=_end_closed_sessions, name="dpviz kept processes watch", daemon=True)]
        _watcher[0].start()


def _end_closed_sessions() -> None:
    """Every WATCH_S, end the kept process of each page session that has closed; leave once none is alive."""
    while True:
        time.sleep(WATCH_S)
        kept = [kept for kept in list(_EVERY) if kept.alive()]
        for one in kept:
            if one.session_closed():
                one.close()
        with _watching:
            if not any(one.alive() for one in list(_EVERY)):
                _watcher.clear()
                return


def end_idle_oldest() -> bool:
    """End the least recently used kept process that is running nothing (True if there was one)."""
    for kept in sorted(list(_EVERY), key=lambda kept: kept.used):
        if kept.close_if_idle():
            return True
    return False
