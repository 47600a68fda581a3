"""A page's forkserver starts in two stages: a run in one process is served by the first, which has torch but not
the ranks' modules; once that run has answered, a fork of it imports the rest and serves every later run, a run of
ranks included; the first stage ends once the runs it started have. Each in a fresh interpreter, whose forkserver
is its own."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from budget import limit

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = """
import json, time
from dpviz.config import RunConfig
from dpviz.engines import processes
from dpviz.engines.apart import call_apart, record_apart, warm

warm()
while processes.forkserver_pid() is None:
    time.sleep(0.01)
first = processes.forkserver_pid()
seen = {"first_has_dynamo": call_apart(processes.imported, "torch._dynamo"),
        "first_has_torch": call_apart(processes.imported, "torch"),
        "tutorial_lanes": len(record_apart(RunConfig(gpus=2)).lanes)}
ddp = record_apart(RunConfig(engine="ddp", gpus=2, data_size=40, batch_size=10))  # waits for the second stage
second = processes.forkserver_pid()
seen.update(ddp_lanes=len(ddp.lanes), ddp_failure=ddp.failure, swapped=second != first,
            second_has_dynamo=call_apart(processes.imported, "torch._dynamo"))
deadline = time.monotonic() + 30
while processes._exists(first) and time.monotonic() < deadline:
    time.sleep(0.05)
seen["first_ended"] = not processes._exists(first)
print(json.dumps(seen))
"""


def test_a_one_process_run_comes_from_the_first_stage_and_a_run_of_ranks_from_the_second():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True,
                          timeout=limit(starts=3, then_s=60))
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["first_has_torch"] and not seen["first_has_dynamo"]  # the first stage did not wait for the ranks' modules
    assert seen["tutorial_lanes"] == 2 and seen["ddp_lanes"] == 2 and seen["ddp_failure"] is None
    assert seen["swapped"] and seen["second_has_dynamo"]
    assert seen["first_ended"]
