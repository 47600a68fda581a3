"""Warnings raised by one run's DataParallel calls, collected while other sessions run beside it.

Python's warning filters and its `showwarning` hook are process-wide (before 3.14), and
`warnings.catch_warnings` swaps them for the whole process: two threads using it at once restore each
other's state in the wrong order, lose each other's warnings and can leave the process with a hook
that appends to a dead list. So one lock serialises the windows in which runs collect, and a window
is a single DataParallel call (milliseconds for the tutorial, longer for the largest batches): other
sessions' calls wait at most that long, and everything else they do (loading data, steps, drawing)
runs in parallel. Inside a window only the
warnings raised on the run's own threads (the caller and the replica threads it names) are kept;
any other thread's warning goes on to the hook that was installed before.
"""
from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager

_WINDOW = threading.Lock()

OnWarning = Callable[[str, str], None]  # (category name, message)


@contextmanager
def collecting(on_warning: OnWarning, threads: Collection[threading.Thread] = ()) -> Iterator[None]:
    """Pass every warning raised in this block on the calling thread or on `threads` (read when a
    warning comes, so the set may grow inside the block) to `on_warning`, each occurrence counted
    (as `simplefilter("always")`); filters and hooks are as they were afterwards.

    Threads are matched as objects, not by ident: an ended replica's ident is soon reused by
    another thread, perhaps another session's."""
    caller = threading.current_thread()
    with _WINDOW, warnings.catch_warnings():
        passed_on = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None) -> None:
            thread = threading.current_thread()
            if thread is caller or thread in threads:
                on_warning(category.__name__, str(message))
            else:
                passed_on(message, category, filename, lineno, file, line)

        warnings.simplefilter("always")  # every batch's warnings, not only the first of each place
        warnings.showwarning = show
        yield
