"""A script that records a run of processes, with no `if __name__ == "__main__":` guard, run from a folder outside
the repository (dpviz found through the script's own sys.path): its ranks run dpviz's own function and never the
script again, so the run ends well and nothing else is printed."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from budget import limit

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})  # dpviz, found as a user's script finds a checkout
import dpviz
from dpviz.config import RunConfig

trace = dpviz.record(RunConfig(engine=sys.argv[1], gpus=2, train=True, data_size=40))
print("failure:", trace.failure)
print("steps:", len(trace.batches))
"""


@pytest.mark.parametrize("engine", ["ddp", "fsdp"])
def test_a_script_without_a_main_guard_runs_from_any_folder(tmp_path, engine):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    done = subprocess.run([sys.executable, str(script), engine], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=limit(starts=4, then_s=60))  # the script, the forkserver and two ranks start
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["failure: None", "steps: 2"], done.stdout + done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]


def test_starting_the_forkserver_leaves_this_process_environment_as_it_was(monkeypatch):
    from multiprocessing import forkserver

    from dpviz.engines.processes import start_forkserver

    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
    start_forkserver()
    assert os.environ["PYTHONPATH"] == "/somewhere/else"
    assert forkserver._forkserver._forkserver_pid is not None  # it runs, whether this call started it or not
    monkeypatch.delenv("PYTHONPATH")
    start_forkserver()
    assert "PYTHONPATH" not in os.environ
