"""A run recorded in a process of its own, so that the process asking for it (a hosted page's server) never
imports torch and gets back every byte the run used when its process ends.

    trace = record_apart(config, progress, still_wanted)   # any engine; raises RunFailed when the run could not

The run's process is a fork of the forkserver that already holds torch (dpviz.engines.ranks.launch), so it starts
in about 13 ms; a run of DDP, ZeRO-1 or FSDP forks its ranks from it in turn (launch.py: the "fork" start method
inside a run process). Why a process, not a thread of the server (docs/architecture.md, "Where runs happen"):
torch in the server costs about 120 MB that the forkserver already holds, and a long-lived server does not give
back to the system what a large run's Python objects took, while a process that ends gives back all of it.

What comes back is the trace; its spans travel as columns (one list per field), three times faster to send and
rebuild than as 80,000 pickled objects at the largest settings. Whatever ends the run early (the session's
`still_wanted` raising, a signal, the caller's own end, even kill -9 of the caller) ends its process too.
"""
from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any, Callable

from dpviz.config import RunConfig
from dpviz.engines.base import Progress
from dpviz.trace import Trace
from dpviz.trace.model import Span

POLL_S = 0.1  # how often the caller looks at a run that says nothing (a closed tab ends it within this)
PROGRESS_EVERY_S = 0.05  # a run of thousands of batches tells its progress at most this often
_SPAN_FIELDS = tuple(field.name for field in dataclasses.fields(Span))


class RunFailed(RuntimeError):
    """The run's process raised, or ended without a word: `kind` is the exception's type name there."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def warm() -> None:
    """Start the forkserver the runs come from, in a thread, once per process: a page's script calls this first
    (app.py), so that the first run finds torch already imported there (seconds otherwise). It starts in stages
    (dpviz.engines.processes.start_in_stages): a run in one process, the page's default, waits for torch only, not
    for the ranks' modules."""
    from dpviz.engines.processes import start_in_stages

    with _warming:
        if _warmed:
            return
        _warmed.append(True)
    threading.Thread(target=start_in_stages, name="dpviz forkserver start", daemon=True).start()


_warming = threading.Lock()
_warmed: list[bool] = []


def record_apart(config: RunConfig, progress: Progress | None = None,
                 still_wanted: Callable[[], None] | None = None, *, machine_gpus: int | None = None) -> Trace:
    """Record `config` in a process of its own and return its trace. `progress(done, total)` as the run goes;
    `still_wanted()` at least every POLL_S seconds: whatever it raises ends the run and its process at once.
    `machine_gpus`: the CUDA devices this machine has, when the caller knows (the run's process then never
    asks CUDA before forking ranks, which CUDA would not survive)."""
    from dpviz.engines import ENGINES

    needs_all = ENGINES[config.engine].processes  # a run of ranks needs the forkserver's every module
    return whole(_apart(record_for_caller, (config.to_dict(), machine_gpus), progress, still_wanted, needs_all))


def whole(sent: tuple[Trace, list | None]) -> Trace:
    """The trace `record_for_caller` sent: its shell with its spans rebuilt from their columns."""
    shell, columns = sent
    return dataclasses.replace(shell, spans=list(map(Span, *columns)) if columns else [])


def call_apart(function: Callable[..., Any], *args: Any) -> Any:
    """`function(*args)` (a module-level function whose arguments and result pickle) in a process of its own."""
    return _apart(_call, (function, *args), None, None, False)  # torch's own questions: torch is enough


def _apart(target: Callable[..., Any], args: tuple, progress: Progress | None,
           still_wanted: Callable[[], None] | None, needs_all: bool) -> Any:
    from dpviz.engines.processes import context as _context, run_answered

    context = _context(needs_all)
    receive, send = context.Pipe(duplex=False)
    # Not a daemon: a run of DDP starts its ranks from it (whatever ends the caller ends it: _end_with).
    process = context.Process(target=_main, name="dpviz run", args=(target, args, send, os.getpid()))
    answered = False
    try:
        process.start()
        send.close()  # the caller's copy: the pipe reads as ended once the run's process has gone
        result = answer(receive, process, progress, still_wanted)
        answered = True
        return result
    except RunFailed as failure:
        answered = failure.kind != "ProcessExited"
        raise
    finally:
        receive.close()
        run_answered()  # a forkserver started in stages imports the rest now, out of the first chart's way
        if process.pid is not None:
            if answered:  # it is leaving (os._exit): its exit, some milliseconds, is waited for beside the caller
                threading.Thread(target=_reap, args=(process,), name="dpviz run reaper", daemon=True).start()
            else:
                process.kill()
                process.join()


def answer(receive, process, progress: Progress | None, still_wanted: Callable[[], None] | None) -> Any:
    """Read a run's messages from `receive` until its answer: its result, or RunFailed with what it raised (or
    "ProcessExited" when `process` ended without a word). Progress goes to `progress`; `still_wanted()` is called
    at least every POLL_S seconds, and whatever it raises leaves the run unanswered (the caller ends it)."""
    while True:
        if still_wanted is not None:
            still_wanted()
        if not receive.poll(POLL_S):
            continue
        try:
            kind, *payload = receive.recv()
        except EOFError:
            process.join(timeout=1.0)
            raise RunFailed("ProcessExited", f"the run's process ended with exit code {process.exitcode} "
                                             "without reporting") from None
        if kind == "progress":
            if progress is not None:
                progress(*payload)
        elif kind == "failed":
            raise RunFailed(*payload)
        else:
            return payload[0]


def _reap(process) -> None:
    """Wait for a run's process that has answered to end; kill it if it has not within a poll."""
    process.join(timeout=POLL_S)
    if process.exitcode is None:
        process.kill()
        process.join()


def _main(target: Callable[..., Any], args: tuple, send, caller: int) -> None:
    """The run's process: do the work, send its result (or its failure) to the caller, leave at once."""
    from dpviz.engines.processes import become_a_run, end_with

    become_a_run()
    end_with(caller, None)
    try:
        send.send(("done", target(send, *args)))
    except BaseException as error:  # noqa: BLE001: every failure is the caller's to show
        send.send(("failed", type(error).__name__, str(error)))
    send.close()
    os._exit(0)  # no interpreter teardown: nothing is left to flush, and torch's threads need not be joined


def _call(send, function: Callable[..., Any], *args: Any) -> Any:
    return function(*args)


def record_for_caller(send, values: dict[str, Any], machine_gpus: int | None) -> tuple[Trace, list | None]:
    """Record the run; its trace without its spans, and the spans as columns."""
    import time

    from dpviz.engines import engine
    from dpviz.engines.processes import know_cuda_devices

    if machine_gpus is not None:
        know_cuda_devices(machine_gpus)
    told = [0.0]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - told[0] >= PROGRESS_EVERY_S:
            told[0] = now
            send.send(("progress", done, total))

    config = RunConfig(**values)
    trace = engine(config.engine).record(config, progress)
    columns = [[getattr(span, name) for span in trace.spans] for name in _SPAN_FIELDS] if trace.spans else None
    # torch.__version__ is a str of torch's own class: as a plain str the caller needs no torch to read it
    return dataclasses.replace(trace, spans=[], torch_version=str(trace.torch_version)), columns
