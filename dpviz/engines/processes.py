"""The processes of a run, whatever its engine: the forkserver every run's process and every rank is forked
from, the end of a process whose launcher has gone.

    context()              # the forkserver (a plain fork inside a run's own process), its preload set
    forkserver_pid()       # its process id once it runs
    end_with(launcher, log)  # this process ends when `launcher` does (kill -9 included)

What the forkserver preloads is torch's distributed modules and what each engine's spec names (`preload`), so
that a run's process and its ranks find them imported: what a fork imports for itself is its own memory.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import time
from pathlib import Path


# The forkserver's imports before any engine's: torch, its distributed package, and torch._dynamo (DDP's
# constructor imports it: seconds per rank otherwise). The last import readies the forkserver to fork
# (preloaded.py: the ranks skip the parent's main script, so a script that starts a run needs no __main__ guard).
TORCH_PRELOAD = ["torch", "torch.distributed", "torch._dynamo", "torch.profiler", "torch.profiler._cupti_monitor"]
LAST_PRELOAD = "dpviz.engines.preloaded"


_inside = False  # True in a run's own process (dpviz.engines.apart): its ranks are forked from it
_known_cuda_devices: list[int] = []  # once asked (or told), the answer: a machine's GPUs do not come and go


def become_a_run() -> None:
    """Mark this process as a run's own process (dpviz.engines.apart's), which starts its ranks by forking itself."""
    global _inside
    _inside = True


def inside_a_run() -> bool:
    """Whether this process is a run's own process, which starts its ranks by forking itself."""
    return _inside


def know_cuda_devices(count: int) -> None:
    """Take `count` as this machine's CUDA devices (a run's own process, told by the process that started it:
    asking CUDA itself before forking ranks would leave them a CUDA they cannot use)."""
    _known_cuda_devices[:] = [count]


def known_cuda_devices() -> int | None:
    """This machine's CUDA devices, once asked or told (dpviz.engines.run.cuda_device_count asks)."""
    return _known_cuda_devices[0] if _known_cuda_devices else None


def preload() -> list[str]:
    """Every module the forkserver imports, in order: torch's, each engine's own, then the one that readies it."""
    from dpviz.engines import ENGINES

    engines = [module for spec in ENGINES.values() for module in spec.preload]
    return list(dict.fromkeys([*TORCH_PRELOAD, *engines, LAST_PRELOAD]))


def forkserver_pid() -> int | None:
    """The forkserver's process id once it runs (every rank is its child), else None."""
    from multiprocessing import forkserver

    return forkserver._forkserver._forkserver_pid


def context() -> multiprocessing.context.BaseContext:
    """The forkserver; inside a run's own process (dpviz.engines.apart), which is already a fork of it with no
    other thread at work, a plain fork of that process: a rank needs nothing the forkserver would add."""
    if inside_a_run():
        return multiprocessing.get_context("fork")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(preload())
    start_forkserver()
    return context


_starting = threading.Lock()


def start_forkserver() -> None:
    """Start the forkserver if it is not running, able to import dpviz from wherever this process found it.

    Python 3.11's forkserver does not apply its parent's sys.path: a script run from another folder, which found
    dpviz through its own sys.path, would start a forkserver that cannot import dpviz, and each rank would then run
    the script again as multiprocessing does (a script without an `if __name__ == "__main__":` guard starting runs
    of its own). Where dpviz's folder is not already the folder the forkserver starts in (a page's server runs in
    the repository) nor on PYTHONPATH, it goes on the forkserver's PYTHONPATH while it starts, once: this process's
    environment is as it was before this returns (a lock keeps two starts apart), and a running forkserver is left
    as it is, the environment untouched."""
    from multiprocessing import forkserver

    with _starting:
        running = forkserver_pid()
        if running is not None and _exists(running):  # the usual case: started once, at the first page or run
            return  # (not reaped here: multiprocessing reaps it, and restarts one that has ended)
        root = str(Path(__file__).resolve().parents[2])
        saved = os.environ.get("PYTHONPATH")
        if root == os.getcwd() or root in (saved or "").split(os.pathsep):  # it finds dpviz as it is: the page's
            forkserver.ensure_running()  # server (started in the repository) never touches its environment
            return
        os.environ["PYTHONPATH"] = os.pathsep.join([root, saved] if saved else [root])
        try:
            forkserver.ensure_running()
        finally:
            if saved is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = saved


def delta(seconds: float):
    import datetime

    return datetime.timedelta(seconds=seconds)


def end_with(launcher: int, log: str | None) -> None:
    """End this rank as soon as the process that launched it ends, whatever ended it (kill -9 included):
    its parent is the forkserver, which lives on while any rank does, so nothing else would. The launcher
    removes the ranks' logs when it ends a run; one that was killed cannot, so each rank takes its own log
    with it and the last one out the folder."""
    try:
        handle = os.pidfd_open(launcher)  # that process itself, never a later one given its number
    except (AttributeError, OSError):  # no pidfd (Linux < 5.3, other systems), or the launcher has gone
        handle = None

    def watch() -> None:
        if handle is not None:
            import select

            select.select([handle], [], [])  # readable once the launcher has ended
        else:
            while _exists(launcher):
                time.sleep(1.0)
        with contextlib.suppress(OSError, TypeError):  # TypeError: a run's own process keeps no log
            os.unlink(log)
            os.rmdir(os.path.dirname(log))  # refused while another rank's log is still there
        os._exit(1)

    threading.Thread(target=watch, name="dpviz launcher watch", daemon=True).start()


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # there, but another user's
        return True
    return True
