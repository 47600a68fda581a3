"""Signals that stop a command-line run: SIGTERM, SIGINT and SIGHUP become one exception in the main thread.

    with stop_on_signals():
        ...                  # the first SIGTERM, SIGINT or SIGHUP raises Stopped here

Raised rather than left to the signal's default action, so that every `finally` on the way out runs: the
rank processes are killed, a half-written file is removed, and the command line says in one line what
stopped it and exits as shells expect (128 + the signal's number: 130 for Ctrl-C, 143 for `kill`).
Only the main thread can take signals, so elsewhere (a page's script thread) this does nothing: the
server's own handlers stop its sessions, and a stopped session ends its run's processes.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
WORDS = {signal.SIGINT: "SIGINT (Ctrl-C)", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP (the terminal closed)"}


class Stopped(BaseException):
    """A signal asked the run to stop. A BaseException, as KeyboardInterrupt is, so that a run's own
    `except Exception` (which turns a model's error into a trace) lets it through."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def words(self) -> str:
        return WORDS.get(self.signum, signal.Signals(self.signum).name)

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


def ignore_signals() -> None:
    """From now on SIGNALS do nothing (for a process whose work is done and that is about to exit)."""
    for number in SIGNALS:
        signal.signal(number, signal.SIG_IGN)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block, the first of SIGNALS raises Stopped; the handlers before it come back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.getsignal(number) for number in SIGNALS}

    def stop(signum: int, frame) -> None:
        # Once: a second Ctrl-C must not cut short the cleanup the first one started (it is bounded:
        # the ranks are killed, not asked).
        ignore_signals()
        raise Stopped(signum)

    for number in SIGNALS:
        signal.signal(number, stop)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)  # None: set outside Python
