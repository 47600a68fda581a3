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


# A session's kept process (dpviz.engines.warm), as `ps` and /proc/PID/comm show it; 15 characters at most (the kernel
# keeps 15). Only a process that forks nothing is named: a fork would inherit the name.
KEPT_NAME = "dpviz kept run"


def name_this_process(name: str) -> None:
    """Give this process `name` where `ps` and /proc/PID/comm show it (Linux; elsewhere nothing): a process kept
    between a session's runs tells itself apart from a run's own process and its ranks, forks of the same command
    line."""
    try:
        with open("/proc/self/comm", "w") as comm:
            comm.write(name[:15])
    except OSError:
        pass


def inside_a_run() -> bool:
    """Whether this process is a run's own process, which starts its ranks by forking itself."""
    return _inside


def know_cuda_devices(count: int | None) -> None:
    """Take `count` as this machine's CUDA devices (a run's own process, told by the process that started it:
    asking CUDA itself before forking ranks would leave them a CUDA they cannot use); None: not known."""
    _known_cuda_devices[:] = [] if count is None else [count]


def known_cuda_devices() -> int | None:
    """This machine's CUDA devices, once asked or told (dpviz.engines.run.cuda_device_count asks)."""
    return _known_cuda_devices[0] if _known_cuda_devices else None


def preload(first: bool = False) -> list[str]:
    """Every module the forkserver imports, in order: torch's, each engine's own, then the one that readies it.
    `first`: only what a run in one process needs (torch and the engines without ranks), the first stage of a
    forkserver started in stages (start_in_stages)."""
    from dpviz.engines import ENGINES

    if first:
        engines = [module for spec in ENGINES.values() if not spec.processes for module in spec.preload]
        return list(dict.fromkeys(["torch", *engines, LAST_PRELOAD]))
    engines = [module for spec in ENGINES.values() for module in spec.preload]
    return list(dict.fromkeys([*TORCH_PRELOAD, *engines, LAST_PRELOAD]))


def imported(name: str) -> bool:
    """Whether this process has module `name` (asked of a run's process: what its forkserver had imported)."""
    import sys

    return name in sys.modules


def forkserver_pid() -> int | None:
    """The forkserver's process id once it runs (every rank is its child), else None."""
    from multiprocessing import forkserver

    return forkserver._forkserver._forkserver_pid


def context(whole: bool = True) -> multiprocessing.context.BaseContext:
    """The forkserver; inside a run's own process (dpviz.engines.apart), which is already a fork of it with no
    other thread at work, a plain fork of that process: a rank needs nothing the forkserver would add.
    `whole=False`: a run in one process, which need not wait for a forkserver started in stages to have every
    module (start_in_stages): its first stage has what such a run needs."""
    if inside_a_run():
        return multiprocessing.get_context("fork")
    start_forkserver(preload())
    if whole:
        _go_on.set()  # a run that needs the second stage: it starts now, if it waits for a first run
        _needed.set()
        _whole.wait()
    return multiprocessing.get_context("forkserver")


def run_answered() -> None:
    """A run's process has answered (dpviz.engines.apart): a forkserver started in stages may import its second
    stage now, no longer in the way of the first chart."""
    _go_on.set()


_starting = threading.RLock()
_whole = threading.Event()  # clear only while a forkserver started in stages is importing its second stage
_whole.set()
_go_on = threading.Event()  # set once a run has answered, or a run needs the second stage
_needed = threading.Event()  # set once a run needs the second stage
FIRST_RUN_S = 60.0  # the second stage starts after this long even if no run has come
# After the first run's answer, the page still sends its chart and the browser draws it (plotly's script loaded
# and run: seconds on a busy host of two cores); the second stage waits this long more, unless a run needs it.
DRAWN_S = 5.0


def start_in_stages() -> None:
    """Start the forkserver in two stages, for a page's first chart: first torch and what a run in one process
    needs (a DataParallel run, the page's default, can start from it seconds sooner), then the rest (torch's
    distributed modules and torch._dynamo, the ranks' engines: twice torch's own import), once the first run has
    answered, in a process forked from it, which serves every run from then on as the forkserver, sharing torch's pages with the first stage. The first
    stage ends once no run is left that came from it. A forkserver already running is left as it is; where the
    second stage fails, the first goes on serving every run (a run of ranks then imports what it lacks itself)."""
    from multiprocessing import forkserver

    with _starting:  # held until the first stage runs: a run asking meanwhile finds it, and starts no other
        running = forkserver_pid()
        if running is not None and _exists(running):
            return
        _whole.clear()
        try:
            start_forkserver(preload(first=True))
        except BaseException:
            _whole.set()
            raise
    try:
        # The second stage's imports, on a host of two cores, would take their turns with the first run and the
        # drawing of its chart: they wait for that first run's answer (or for a run that needs them).
        _go_on.wait(FIRST_RUN_S)
        _needed.wait(DRAWN_S)
        _second_stage(forkserver._forkserver)
    finally:
        forkserver._forkserver._preload_modules = preload()  # a forkserver started again has every module at once
        _whole.set()


def _second_stage(server) -> None:
    """Fork the first stage into the forkserver with every module, and send every later run to it."""
    import socket
    import types
    from multiprocessing import connection

    first = set(preload(first=True))
    rest = [module for module in preload() if module not in first]
    address = connection.arbitrary_address("AF_UNIX")
    alive_r, alive_w = os.pipe()  # the new forkserver ends when every holder of alive_w has (as multiprocessing's)
    alive = connection.Connection(alive_r)
    ready_r, ready_w = multiprocessing.get_context("forkserver").Pipe(duplex=False)
    try:
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(address)
            os.chmod(address, 0o600)
            listener.listen()
            # A daemon: this process's exit ends it (multiprocessing would otherwise wait for it, which waits for that).
            multiprocessing.get_context("forkserver").Process(
                target=_serve_whole, name="dpviz forkserver", args=(listener, alive, rest, ready_w), daemon=True).start()
        alive.close()
        ready_w.close()
        pid = ready_r.recv()  # EOFError: it ended before serving (the first stage serves on)
    except BaseException:
        os.close(alive_w)
        raise
    finally:
        alive.close()
        ready_w.close()
        ready_r.close()
    with server._lock:
        first_pid = server._forkserver_pid
        # The descriptor every run is handed now keeps the second stage alive and no longer the first, which ends
        # when the runs it started have. Replaced in place, never closed: a run starting at this very moment, which
        # read the first stage's address, still hands over a descriptor that is open.
        os.dup2(alive_w, server._forkserver_alive_fd, inheritable=False)
        os.close(alive_w)
        server._forkserver_address, server._forkserver_pid = address, pid
        # Not this process's child (the first stage's): multiprocessing's check would wait for it as for a child.
        server.ensure_running = types.MethodType(_ensure_whole_running, server)
    threading.Thread(target=os.waitpid, args=(first_pid, 0), name="dpviz first stage reaper", daemon=True).start()


def _serve_whole(listener, alive, modules: list[str], ready) -> None:
    """The second stage, in a fork of the first: import the rest, then serve as multiprocessing's forkserver."""
    import gc
    import importlib
    from multiprocessing import forkserver

    for name in modules:
        importlib.import_module(name)
    gc.freeze()  # as preloaded.py does: what is imported stays shared with every fork
    os.close(forkserver._forkserver._forkserver_alive_fd)  # the first stage's: it may end without this one
    forkserver._forkserver._forkserver_alive_fd = None
    alive_fd = os.dup(alive.fileno())
    alive.close()
    ready.send(os.getpid())
    ready.close()
    forkserver.main(listener.detach(), alive_fd, [])


def _ensure_whole_running(server) -> None:
    """multiprocessing's ensure_running for a forkserver that is not this process's child: nothing to do while it
    runs; once it has ended, forget it and start a new one as multiprocessing does."""
    from multiprocessing import resource_tracker

    with server._lock:
        resource_tracker.ensure_running()
        if server._forkserver_pid is not None and _exists(server._forkserver_pid) and not _zombie(server._forkserver_pid):
            return
        os.close(server._forkserver_alive_fd)
        server._forkserver_address = server._forkserver_alive_fd = server._forkserver_pid = None
        del server.ensure_running  # the class's own again
    server.ensure_running()


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def start_forkserver(modules: list[str] | None = None) -> None:
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
        forkserver._forkserver._preload_modules = preload() if modules is None else modules
        root = str(Path(__file__).resolve().parents[2])
        saved = os.environ.get("PYTHONPATH")
        if root == os.getcwd() or root in (saved or "").split(os.pathsep):  # it finds dpviz as it is: the page's
            forkserver._forkserver.ensure_running()  # server (started in the repository) never touches its
            return  # environment (the instance's: a forkserver started in stages has its own check)
        os.environ["PYTHONPATH"] = os.pathsep.join([root, saved] if saved else [root])
        try:
            forkserver._forkserver.ensure_running()
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
