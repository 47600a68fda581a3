"""Rank processes end with their run: after success, a rank's error, a rank that stops answering, and a
caller that stops listening (a page closed mid-run). Real gloo processes, real failures."""
from __future__ import annotations

import os

import pytest
import torch

from dpviz.config import RunConfig
from dpviz.engines.ranks.launch import launch
from dpviz.engines.processes import KEPT_NAME, forkserver_pid
from dpviz.engines.ddp.merge import to_trace
from dpviz.trace.check import check
from processes import comm

CONFIG = RunConfig(engine="ddp", gpus=3, train=True, data_size=60, batch_size=6)  # 10 steps


def alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie does not count: it has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def ranks_running() -> list[int]:
    """Processes whose parent is the forkserver, but for one that names itself as kept between a session's runs (a
    page's script run in this process starts those): rank processes."""
    server = forkserver_pid()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if server is not None and int(fields[1]) == server and fields[0] != "Z" \
                    and comm(entry) != KEPT_NAME:
                found.append(int(entry))
    return found


def traced(config: RunConfig, launched: dict):
    trace = to_trace(config, launched, backend="cpu", torch_version=torch.__version__, machine_gpus=0)
    check(trace)  # what the page would load: a failing run's trace is a valid trace too
    return trace


def test_many_runs_end_every_rank_cleanly():
    # SIGABRT at the end of a clean gloo run has been seen on this kind of machine (2 runs in 14):
    # every rank must exit 0, every time.
    for run in range(12):
        launched = launch(RunConfig(engine="ddp", gpus=2 + run % 3, train=run % 2 == 0, data_size=24, batch_size=8))
        assert launched["exit_codes"] == [0] * (2 + run % 3), f"run {run}: {launched['exit_codes']}"
        assert not any(r.get("failure") for r in launched["ranks"])
        assert not any(alive(pid) for pid in launched["pids"]) and ranks_running() == []


def test_a_rank_that_raises_is_named_and_every_process_ends():
    launched = launch(CONFIG, fault=(1, 4, "raise"), timeout_s=20)
    trace = traced(CONFIG, launched)
    assert trace.failure.replica == 1 and trace.failure.batch == 4
    assert trace.failure.message.startswith("rank 1: rank 1 was told to fail in step 4")
    assert len(trace.batches) == 5 and all(b.rows == 6 for b in trace.batches)  # every rank's rows, to the failing step
    assert not any(alive(pid) for pid in launched["pids"]) and ranks_running() == []


def test_a_rank_that_stops_answering_ends_the_run_at_the_timeout():
    launched = launch(CONFIG, fault=(2, 3, "hang"), timeout_s=3)
    trace = traced(CONFIG, launched)
    assert trace.failure.replica == 2 and trace.failure.batch == 3
    # trace.failure.batch is 0-based, the message a reader's count: step 4
    assert "rank 2 stopped answering in step 4" in trace.failure.message or "Timed out" in trace.failure.message
    assert launched["exit_codes"][2] not in (0, None)  # the silent rank was killed
    assert not any(alive(pid) for pid in launched["pids"]) and ranks_running() == []


@pytest.mark.parametrize("engine", ["ddp", "zero1", "fsdp"])
def test_a_rank_that_sets_up_later_than_the_timeout_is_waited_for(engine):
    # On a busy machine ranks start seconds apart: only a step's collective is held to the run's timeout.
    config = RunConfig(**{**CONFIG.to_dict(), "engine": engine})
    launched = launch(config, fault=(1, 4.0, "late"), timeout_s=2)
    trace = traced(config, launched)
    assert trace.failure is None and launched["exit_codes"] == [0, 0, 0]
    assert len(trace.batches) == 10 and all(len(trace.spans_of(b.index, "forward")) == 3 for b in trace.batches)


def test_a_caller_that_stops_listening_takes_every_rank_with_it():
    class Closed(Exception):
        """What a page's script thread raises when its session ends."""

    def progress(done: int, total: int) -> None:
        if done == 2:
            raise Closed

    with pytest.raises(Closed):
        launch(CONFIG, progress)
    assert ranks_running() == []


def test_the_parent_keeps_its_threads_and_environment():
    threads, environment = torch.get_num_threads(), dict(os.environ)
    launch(RunConfig(engine="ddp", gpus=2, data_size=8, batch_size=4))
    assert torch.get_num_threads() == threads and dict(os.environ) == environment


def test_a_script_without_a_main_guard_runs_ddp_and_runs_once(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    script = tmp_path / "unguarded.py"
    script.write_text(
        f"import sys\nsys.path.insert(0, {str(root)!r})\n"
        "from dpviz.config import RunConfig\nfrom dpviz.engines import engine\n"
        "print('script ran')\n"
        "trace = engine('ddp').record(RunConfig(engine='ddp', gpus=2, train=True))\n"
        "print('steps', len(trace.batches), 'failure', trace.failure)\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("script ran") == 1  # no rank ran the script again
    assert "steps 4 failure None" in out.stdout
