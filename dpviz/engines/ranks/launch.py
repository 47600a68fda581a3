"""Start one process per rank, collect what each saw, and make sure every one of them ends.

    results = launch(config, world=4)     # rank by rank: spans, steps, buckets, memory, exit codes

Processes come from a forkserver that has torch, torch.distributed and torch._dynamo imported once
(DDP's constructor imports torch._dynamo: seconds per rank otherwise). A forkserver is started by
fork + exec, so starting ranks is safe from any thread of a server, and each rank is a fork of a
single-threaded process. The parent hosts the rendezvous store on a port the kernel picks (no race for
a free port); every rank's collectives time out after `timeout_s` from its first step on, far below gloo's 30
minutes (before it, while ranks that started seconds apart set up, after program.SETUP_TIMEOUT_S).
A rank that fails reports its error; the others are then ended. A rank that stops answering ends the
run after `timeout_s`. Whatever happens, every process is joined or killed before `launch` returns; when
it returns by an exception (a signal, a page session that ended) they are killed at once. A rank also
ends by itself when the process that launched it ends, however that happens (even `kill -9`), and it
ignores the terminal's Ctrl-C, which its launcher answers for it. What a rank writes to its stdout and
stderr (gloo's and c10d's C++ messages) goes to a log of its own: a rank that dies without reporting is
quoted from it, and nothing of it reaches the user's terminal.
"""
from __future__ import annotations

import os
import queue as queues
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from dpviz.config import RunConfig
from dpviz.engines.processes import context as process_context, delta, end_with

TIMEOUT_S = 30.0  # a collective that waits longer than this ends a torchrun rank (RunConfig.timeout_s for dpviz's own)
GRACE_S = 5.0  # after the timeout, how long the others get to report before they are killed
STARTUP_S = 120.0  # more time for every rank's first report: process start, joining the group, DDP()
END_GRACE_S = 2.0  # how long ranks that have reported get to leave by themselves before they are killed
_COMMUNICATION = ("Connection closed by peer", "Connection reset", "Timed out", "timed out", "Broken pipe",
                  "NCCL communicator was aborted")


def launch(config: RunConfig, progress: Callable[[int, int], None] | None = None, *, cuda: bool = False,
           timeout_s: float | None = None, fault: tuple | None = None, keep_parameters: bool | str = False,
           workload: bytes | None = None) -> dict[str, Any]:
    """Run `config` on `config.gpus` ranks; return {"ranks": [result per rank], "exit_codes": [...], ...}.
    A collective that waits longer than `timeout_s` (the config's timeout_s unless given) ends the run.
    `workload`: the user's own module and batch, packed (dpviz.engines.workload.own.OwnWorkload.pack)."""
    import torch.distributed as dist  # the store; torch is imported by then anyway

    timeout_s = config.timeout_s if timeout_s is None else timeout_s
    world = config.gpus
    context = process_context()
    reports, ports = context.Queue(), context.Queue()
    launched = time.perf_counter()
    logs = Path(tempfile.mkdtemp(prefix="dpviz-ranks-"))
    processes = [
        context.Process(target=_rank_main, name=f"dpviz rank {rank}", daemon=True,
                        args=(rank, world, ports, config.to_dict(), reports, launched, timeout_s, fault,
                              keep_parameters, cuda, os.getpid(), str(logs / f"rank{rank}.log"), workload))
        for rank in range(world)
    ]
    results: dict[int, dict[str, Any]] = {}
    loaded: dict[int, list[list[int]]] = {rank: [] for rank in range(world)}
    stopped: list[int] = []
    store = None
    interrupted = True  # until the ranks have been heard out: an exception on the way kills them at once
    try:
        for process in processes:
            process.start()
        # The rendezvous after the ranks have started: its server is a thread, and a process forked while
        # another of its threads is at work may inherit a lock that nothing will ever release.
        store = dist.TCPStore("127.0.0.1", 0, world_size=None, is_master=True, wait_for_workers=False,
                              timeout=delta(timeout_s))
        for _ in range(world):
            ports.put(store.port)
        stopped = _collect(processes, reports, results, loaded, config.num_batches, progress, timeout_s, logs)
        interrupted = False
    finally:
        try:
            _end(processes, grace_s=0.0 if interrupted else END_GRACE_S)
        finally:  # whatever cut the grace short (a signal), the rest are killed and the clean-up still happens
            exit_codes = _end(processes, grace_s=0.0)
            for channel in (reports, ports):
                channel.close()
                channel.join_thread()
            del store  # the rendezvous ends with the run
            shutil.rmtree(logs, ignore_errors=True)
    for rank in range(world):
        results.setdefault(rank, {"rank": rank, "spans": [], "steps": []})
    return {"ranks": [results[r] for r in range(world)], "loaded": [loaded[r] for r in range(world)],
            "exit_codes": exit_codes, "stopped": stopped, "timeout_s": timeout_s, "launched": launched,
            "pids": [process.pid for process in processes]}


def _collect(processes, reports, results: dict[int, dict], loaded: dict[int, list], steps: int, progress,
             timeout_s: float, logs: Path) -> list[int]:
    """Read the ranks' reports until all have reported, one has failed, or they stop answering.
    Returns the ranks that stopped answering (none when the run ended by itself)."""
    world = len(processes)
    heard = time.monotonic()
    spoken: set[int] = set()  # ranks that have reported at least once: past starting, into their steps
    failed_at: float | None = None
    while len(results) < world:
        try:
            kind, rank, payload = reports.get(timeout=0.1)
        except queues.Empty:
            now = time.monotonic()
            for rank, process in enumerate(processes):
                if rank not in results and process.exitcode is not None:  # died without a word
                    results[rank] = {"rank": rank, "spans": [], "steps": [], "failure": {
                        "type": "ProcessExited", "step": None,
                        "message": f"the process of rank {rank} ended with exit code {process.exitcode} without "
                                   f"reporting{_last_words(logs / f'rank{rank}.log')}"}}
                    failed_at = failed_at or now
            if failed_at is not None and now - failed_at > 1.0:
                # The failing rank has spoken; the others are stuck in a collective it never joins, or
                # stopped answering themselves (those whose peers' errors are only timeouts).
                return [rank for rank in range(world) if rank not in results]
            # Silence counts from the last report once every rank has spoken; before that, starting W
            # processes on a busy machine may take longer than a short collective timeout.
            if now - heard > timeout_s + GRACE_S + (0 if len(spoken) == world else STARTUP_S):
                return [rank for rank in range(world) if rank not in results]
            continue
        heard = time.monotonic()
        spoken.add(rank)
        if kind == "loaded":
            loaded[rank].append(payload[1])
            continue
        if kind == "step":
            if progress is not None and rank == 0:
                progress(payload + 1, steps)
            continue
        results[rank] = payload
        if "failure" in payload and failed_at is None:
            failed_at = heard
    return []


def _end(processes, grace_s: float) -> list[int | None]:
    """Join every rank, killing those still running after `grace_s`; their exit codes in rank order."""
    deadline = time.monotonic() + grace_s
    for process in processes:
        if process.pid is not None and grace_s > 0:
            process.join(timeout=max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.pid is not None and process.exitcode is None:
            process.kill()
    for process in processes:
        if process.pid is not None:
            process.join()
    return [process.exitcode for process in processes]


def _last_words(log: Path, limit: int = 300) -> str:
    """The last line a rank wrote before it died, as a clause for its failure message ("" if none)."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return f"; its last words: {lines[-1][:limit]}" if lines else ""


def _quiet(log: str) -> None:
    """Send this process's stdout and stderr (file descriptors 1 and 2, where C++ writes too) to `log`."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _rank_main(rank: int, world: int, ports, config_values: dict, reports, launched: float, timeout_s: float,
               fault: tuple | None, keep_parameters: bool | str, cuda: bool, launcher: int, log: str,
               workload: bytes | None = None) -> None:
    """A rank process: join the group through the parent's store, run, report, leave cleanly."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the launcher answers it
    _quiet(log)
    end_with(launcher, log)
    import torch
    import torch.distributed as dist

    from dpviz.engines import ENGINES
    from dpviz.engines.ranks.program import run_rank, setup_timeout

    torch.set_num_threads(1)  # a process of its own; W ranks with torch's default threads oversubscribe the cores
    status = 0
    try:
        config = RunConfig(**config_values)
        if workload is not None:  # the user's module: its files imported here, as the command line imported them
            from dpviz.engines.workload.own import unpack

            workload = unpack(workload)

        def init() -> None:
            port = ports.get(timeout=STARTUP_S)  # the launcher's rendezvous, opened once every rank has started
            store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=delta(setup_timeout(timeout_s)))
            dist.init_process_group("nccl" if cuda else "gloo", store=store, rank=rank, world_size=world,
                                    timeout=delta(setup_timeout(timeout_s)))

        program = ENGINES[config.engine].part("rank_program")  # the engine's hooks in the shared loop
        result = run_rank(program, config, rank, world, init, cuda=cuda, local_rank=rank, launched=launched, fault=fault,
                          keep_parameters=keep_parameters, on_step=lambda step: reports.put(("step", rank, step)),
                          on_load=lambda step, ids: reports.put(("loaded", rank, (step, ids))), workload=workload,
                          timeout_s=timeout_s)
    except BaseException as error:  # could not even join the group
        result = {"rank": rank, "spans": [], "steps": [],
                  "failure": {"type": type(error).__name__, "message": str(error).strip(), "step": None}}
        status = 1
    reports.put(("done", rank, result))
    reports.close()
    reports.join_thread()  # the report is written before this process goes
    try:
        if dist.is_initialized():
            dist.destroy_process_group()
    finally:
        # Leave without running the interpreter's teardown, where gloo's threads have been seen to abort
        # the process (SIGABRT) after a clean run.
        os._exit(status)


def consequence(message: str) -> bool:
    """Whether a rank's error is what a peer's failure or silence caused (a closed connection, a timeout)."""
    return any(marker in message for marker in _COMMUNICATION)
