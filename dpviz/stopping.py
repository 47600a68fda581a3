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

import _thread
import contextlib
import signal
import sys
import threading
import time
import types
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


def _deliver_again(signum: int, hook: types.CodeType) -> None:
    """The signal `signum` to the main thread again, once it runs no frame of `hook`."""
    main = threading.main_thread().ident
    while _runs(sys._current_frames().get(main), hook):
        time.sleep(0.001)
    _thread.interrupt_main(signum)  # as if the signal came again: the main thread's handler runs


def _runs(frame: types.FrameType | None, code: types.CodeType) -> bool:
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


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

    def raise_again(unraisable) -> None:
        # A signal that came while Python ran a weakref callback or a __del__ (an import's module lock is dropped
        # by one) raised Stopped where Python cannot pass an exception on: it would be printed and the run would
        # go on. The signal is delivered again once this hook has returned, so that Stopped is raised at the
        # next line the main thread runs (delivered here, the handler would run in the hook and be lost too).
        if isinstance(unraisable.exc_value, Stopped):
            signal.signal(unraisable.exc_value.signum, stop)
            threading.Thread(target=_deliver_again, args=(unraisable.exc_value.signum, raise_again.__code__),
                             name="dpviz-signal-again", daemon=True).start()
            return
        previous_hook(unraisable)

    previous_hook = sys.unraisablehook
    sys.unraisablehook = raise_again
    for number in SIGNALS:
        signal.signal(number, stop)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)  # None: set outside Python
        sys.unraisablehook = previous_hook
