"""One session's process for its small runs, kept between them, so that a new run at the tutorial's settings
pays no fork of the forkserver (which copies torch's page tables and ends in tearing them down).

    warm = WarmProcess(on_end=release)        # nothing started yet
    trace = warm.record(config, progress, still_wanted)   # the first run starts the process; later ones reuse it
    warm.close()                              # the session's end: the process is killed, `on_end()` called once

It is a fork of the forkserver, as a run's own process is (dpviz.engines.apart), that runs one run after another
and waits for the next; it ends when it has waited `idle_s` for one, when the process that started it ends (kill -9
included), when `close()` is called, and whenever a run is left before it answers (a closed tab): it is killed
then, and the next run starts a fresh one. Only single-process runs small enough to keep no more memory than they
were priced at belong here (dpviz.page.session decides); what a run leaves behind in the process's heap is
bounded by that, and by `most_runs`, after which the process is let go and the next run starts a fresh one.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Callable

from dpviz.config import RunConfig
from dpviz.engines.apart import RunFailed, answer, record_for_caller, whole
from dpviz.engines.base import Progress
from dpviz.engines.processes import run_answered
from dpviz.trace import Trace

IDLE_S = 60.0  # a session that has not asked for a run this long gives its process back
MOST_RUNS = 50  # runs one process serves before a fresh one takes over: its heap grows about 0.1 MB a run
_MARGIN_S = 1.0  # the caller's idle clock starts later than the process's: it never reuses one about to leave


class WarmProcess:
    """A process kept for one caller's runs, one at a time; `on_end()` once it has ended, however it ended."""

    def __init__(self, idle_s: float = IDLE_S, most_runs: int = MOST_RUNS, on_end: Callable[[], None] | None = None):
        self.idle_s, self.most_runs, self._on_end = idle_s, most_runs, on_end
        self._lock = threading.Lock()  # one run at a time (a session's reruns may overlap)
        self._process = self._connection = None
        self._runs, self._last = 0, 0.0

    def alive(self) -> bool:
        """Whether a process is there for the next run (it may still leave before then, by its idle limit)."""
        return self._process is not None and self._process.exitcode is None

    def close_if_idle(self) -> bool:
        """End the process if it is alive and running nothing now (True if it did): a run never starts in it
        meanwhile."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if not self.alive():
                return False
            self._end()
            return True
        finally:
            self._lock.release()

    @property
    def pid(self) -> int | None:
        """The kept process's id while there is one."""
        return self._process.pid if self._process is not None else None

    def record(self, config: RunConfig, progress: Progress | None = None,
               still_wanted: Callable[[], None] | None = None, *, machine_gpus: int | None = None) -> Trace:
        """Record `config` in the kept process (started first if there is none) and return its trace, as
        dpviz.engines.apart.record_apart does."""
        with self._lock:
            if not (self.alive() and self._runs < self.most_runs
                    and time.monotonic() - self._last < self.idle_s - _MARGIN_S):
                self._end()
                self._start()
            answered = False
            try:
                self._connection.send((record_for_caller, (config.to_dict(), machine_gpus)))
                self._runs += 1
                sent = answer(self._connection, self._process, progress, still_wanted)
                answered = True
            except RunFailed as failure:
                answered = failure.kind != "ProcessExited"  # it raised, and waits for the next run
                raise
            finally:
                run_answered()  # a forkserver started in stages imports the rest now, out of the first chart's way
                if answered:
                    self._last = time.monotonic()
                else:  # left mid-run (a closed tab), or gone: it is ended now, and the next run starts afresh
                    self._end()
            return whole(sent)

    def close(self) -> None:
        """End the process now (a session that has ended); a run in flight fails as its process has gone."""
        process = self._process
        if process is not None and process.exitcode is None:
            process.kill()  # without the lock: a run in flight must not hold up its session's end
        with self._lock:
            self._end()

    def _start(self) -> None:
        from dpviz.engines.processes import context as _context

        # A run in one process needs torch only (a forkserver's first stage will do); a daemon: a server that
        # exits ends it, and it starts no processes of its own.
        context = _context(False)
        mine, theirs = context.Pipe(duplex=True)
        process = context.Process(target=_serve, name="dpviz warm runs", daemon=True,
                                  args=(theirs, os.getpid(), self.idle_s))
        try:
            process.start()
        finally:
            theirs.close()
        self._process, self._connection, self._runs, self._last = process, mine, 0, time.monotonic()
        threading.Thread(target=self._watch, args=(process,), name="dpviz warm runs watch", daemon=True).start()

    def _watch(self, process) -> None:
        """Once `process` has ended (its idle limit, a kill), tell `on_end`."""
        process.join()
        if self._on_end is not None and self._process in (None, process):  # not when a fresh one has taken over
            self._on_end()

    def _end(self) -> None:
        process, connection = self._process, self._connection
        self._process = self._connection = None
        if connection is not None:
            connection.close()
        if process is not None:
            if process.exitcode is None:
                process.kill()
            process.join()


def _serve(connection, caller: int, idle_s: float) -> None:
    """The kept process: run each (function, arguments) sent, send back its result or its failure, and leave
    once nothing has come for `idle_s` seconds or the caller has gone."""
    from dpviz.engines.processes import KEPT_NAME, become_a_run, end_with, name_this_process

    become_a_run()
    name_this_process(KEPT_NAME)
    end_with(caller, None)
    try:
        while connection.poll(idle_s):
            function, args = connection.recv()
            try:
                connection.send(("done", function(connection, *args)))
            except Exception as error:  # noqa: BLE001: every failure is the caller's to show
                connection.send(("failed", type(error).__name__, str(error)))
    finally:
        os._exit(0)  # no interpreter teardown, as a run's own process (dpviz.engines.apart)
