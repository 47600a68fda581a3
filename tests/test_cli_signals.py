"""`python -m dpviz` stopped by a signal, as a user stops it: `kill` (SIGTERM), Ctrl-C (SIGINT, to the command
alone or to its whole process group, as a terminal sends it) and a closed terminal (SIGHUP), each at several
moments of a real DDP run: while the modules load, while the ranks start, while they run their steps, and
while the trace is written. Every process the run started must end within seconds, one line must say what
stopped it, the exit status must be 128 + the signal's number, and the trace file must be the one that was
there before or a complete new one, never a part of one."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from dpviz.trace import json_io as trace_json
from dpviz.cli import atomic_write
from dpviz.stopping import Stopped

from budget import limit, torch_start_s
from processes import command_line, descendants, handles, running, threads, wait_for

ROOT = Path(__file__).resolve().parents[1]
RUN = ["--engine", "ddp", "--gpus", "2", "--train", "--model", "gru", "--batch-size", "200"]
STEPS = 500  # long enough that the ranks are still stepping when signalled, and a trace that takes a while to write
ENDED_S = 5.0  # "within a few seconds": from the signal to the last process gone, on a quiet machine
OLD = "the trace of an earlier run\n"
MOMENTS = ("loading", "starting", "stepping", "writing")


def start(folder: Path, **popen) -> subprocess.Popen:
    torch_start_s()  # measured before the run starts, not while it runs past the moment it is waited for
    (folder / "run.json").write_text(OLD)
    command = [sys.executable, "-m", "dpviz", *RUN, "--data-size", str(STEPS * 200), "--trace",
               str(folder / "run.json"), "--chrome-trace", str(folder / "run.perfetto.json")]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def ranks_of(pid: int) -> list[int]:
    """The run's rank processes: below its forkserver, which is below the command line."""
    return [p for p, _ in descendants(pid) if "forkserver" in command_line(p) and
            not any(c for c, _ in descendants(p))]


def ended(process: subprocess.Popen) -> bool:
    return process.poll() is not None


def reach(moment: str, process: subprocess.Popen, seen: set) -> None:
    """Wait until the run is at `moment`, noting every process below it on the way."""
    deadline = time.monotonic() + limit(starts=3, then_s=60)
    root = process.pid
    if moment == "loading":  # its handlers are in place and nothing has started yet
        reached = wait_for(lambda: handles(root, signal.SIGTERM), deadline, seen=seen, root=root)
        assert not descendants(root), "the command line started processes before it could be stopped"
    elif moment == "starting":  # the forkserver that starts the ranks is up
        reached = wait_for(lambda: any("forkserver" in command_line(p) for p, _ in descendants(root)), deadline,
                           seen=seen, root=root)
    elif moment == "stepping":  # both ranks have joined the process group (gloo's threads) and run their steps
        reached = wait_for(lambda: ended(process) or len(ranks_of(root)) == 2 and all(threads(p) > 2 for p in ranks_of(root)),
                           deadline, seen=seen, root=root)
        assert not ended(process), f"the run ended before its ranks stepped: {process.stderr.read()[-2000:]}"
    else:  # the log is printed whole just before the files are written: its last step's line is the cue
        reach("stepping", process, seen)  # the ranks, seen while they run
        last = f"Step {STEPS} of {STEPS}:"
        reached = any(line.startswith(last) for line in process.stdout)  # stops reading at that line
    assert reached, f"the run did not reach {moment!r} in time"


def check_ended(process: subprocess.Popen, number: int, seen: set, folder: Path, out: str) -> None:
    err = process.stderr.read()
    code = process.wait(timeout=limit(starts=1, then_s=ENDED_S))
    assert wait_for(lambda: not any(running(p) for p in seen), time.monotonic() + ENDED_S), \
        [command_line(p)[:120] for p, _ in seen if running((p, _))]
    name = signal.Signals(number).name
    if code == 0:  # the signal came once the files were in place: a stop then changes nothing
        assert trace_json.loads((folder / "run.json").read_text()).failure is None
    else:
        assert code == 128 + number, (code, err)
        assert err.count("\n") == 1 and err.startswith(f"dpviz: stopped by {name}"), err
        text = (folder / "run.json").read_text()
        if "run.json had been written whole" in err:  # stopped between the two files: the first is complete
            assert trace_json.loads(text).failure is None
        else:
            assert text == OLD  # the earlier trace, whole
    assert "Traceback" not in err + out and "[W" not in err  # no Python traceback, no C++ warning from a rank
    assert not list(folder.glob(".*.tmp")), "a temporary file was left behind"


@pytest.mark.parametrize("moment", MOMENTS)
@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda n: signal.Signals(n).name)
def test_a_signal_at_any_moment_ends_every_process_and_says_so(number, moment, tmp_path):
    process = start(tmp_path)
    seen: set = set()
    try:
        reach(moment, process, seen)
        assert bool(seen) == (moment != "loading"), seen  # the moments past loading have processes to end
        process.send_signal(number)
        out = process.stdout.read()
        check_ended(process, number, seen, tmp_path, out)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_ctrl_c_in_a_terminal_reaches_every_process_and_still_ends_in_one_line(tmp_path):
    # A terminal's Ctrl-C goes to the whole foreground process group: the forkserver and the ranks get SIGINT too.
    process = start(tmp_path, start_new_session=True)
    seen: set = set()
    try:
        reach("stepping", process, seen)
        os.killpg(process.pid, signal.SIGINT)
        out = process.stdout.read()
        check_ended(process, signal.SIGINT, seen, tmp_path, out)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_kill_9_of_the_command_line_still_ends_every_rank_and_leaves_no_log_behind(tmp_path, request):
    # SIGKILL runs no handler and no finally: each rank watches its launcher and ends itself, its log with it.
    # A short folder of its own: the forkserver's socket lives there, and a Unix socket's path holds at most 107
    # bytes (pytest's tmp_path under a parallel worker is longer than that leaves room for).
    scratch = Path(tempfile.mkdtemp(prefix="dpviz-k9-"))
    request.addfinalizer(lambda: shutil.rmtree(scratch, ignore_errors=True))
    process = start(tmp_path, env={**os.environ, "TMPDIR": str(scratch)})
    seen: set = set()
    try:
        reach("stepping", process, seen)
        assert any(p.name.startswith("dpviz-ranks-") for p in scratch.iterdir())  # where the ranks log
        process.kill()
        process.wait(timeout=limit(starts=1, then_s=ENDED_S))
        assert wait_for(lambda: not any(running(p) for p in seen), time.monotonic() + ENDED_S), \
            [command_line(p)[:120] for p, _ in seen if running((p, _))]  # ranks, their forkserver, its tracker
        logs = lambda: [p.name for p in scratch.iterdir() if p.name.startswith("dpviz-ranks-")]
        assert wait_for(lambda: not logs(), time.monotonic() + ENDED_S), logs()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_stop_while_writing_leaves_the_earlier_file_whole(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(OLD)
    opened = Path.open

    class HalfWritten:
        """A file whose writing a signal stops half-way."""

        def __init__(self, file):
            self.file = file

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.file.close()

        def write(self, text):
            self.file.write(text[: len(text) // 2])
            raise Stopped(signal.SIGTERM)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Path, "open", lambda self, *a, **k: HalfWritten(opened(self, *a, **k)))
        with pytest.raises(Stopped):
            atomic_write(path, '{"a trace": "' + "x" * 100_000 + '"}')
    assert path.read_text() == OLD and not list(tmp_path.glob(".*.tmp"))
    atomic_write(path, "new\n")
    assert path.read_text() == "new\n" and not list(tmp_path.glob(".*.tmp"))


class _SignalledWhileCollected:
    """An object whose __del__ is where the signal comes in, as an import's module lock is dropped by a weakref
    callback: Python prints an exception raised there and goes on."""

    def __del__(self):
        signal.raise_signal(signal.SIGTERM)  # runs the handler here, inside __del__


def test_a_signal_that_comes_where_python_swallows_exceptions_still_stops_the_run(capfd):
    from dpviz.stopping import stop_on_signals
    hook = sys.unraisablehook
    deadline = time.monotonic() + 30.0  # what is tested is "never": a thread starts in well under a second
    with pytest.raises(Stopped) as stopped:
        with stop_on_signals():
            doomed = _SignalledWhileCollected()
            del doomed
            while time.monotonic() < deadline:  # the run going on: Stopped ends it
                time.sleep(0.001)
    assert stopped.value.signum == signal.SIGTERM and time.monotonic() < deadline
    assert "Exception ignored" not in capfd.readouterr().err
    assert sys.unraisablehook is hook and signal.getsignal(signal.SIGTERM) is not None
