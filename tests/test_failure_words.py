"""A failed run's last line (the command line's, and the page's boxes) ends with torch's own cause: the line of the
original exception that Python's traceback ends with, as torch raises it on a plain run of the same failing input.

The presets fail for real (the command line in a process of its own, the page through AppTest); the oracle is torch
called directly: BatchNorm1d on the one row the last chunk holds, and DistributedDataParallel on one rank (gloo, in a
process of its own: a process group is process-wide) with the same layer that gets no gradient.
"""
from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import textwrap

import pytest
from streamlit.testing.v1 import AppTest

from dpviz import record
from dpviz.analysis.failure_words import failure_parts, failure_text
from dpviz.config import RunConfig
from dpviz.echo import MESSAGE_LIMIT, code_span
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.presets import ALL_PRESETS
from dpviz.trace import Failure, Trace

TIMEOUT = 120


def cli(preset: str) -> str:
    """The command line's last line on stderr for a preset, run in a process of its own."""
    result = subprocess.run([sys.executable, "-m", "dpviz", "--preset", preset], capture_output=True, text=True,
                            timeout=TIMEOUT)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    return lines[-1]


def page(preset: str) -> AppTest:
    app = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    app.query_params["preset"] = preset
    return app.run()


def raised_by(call) -> BaseException:
    with pytest.raises(Exception) as info:
        call()
    return info.value


def last_line(error: BaseException) -> str:
    """The last line Python prints for an uncaught one-line `error`."""
    return f"{type(error).__name__}: {error}"


def batchnorm_oracle() -> str:
    """What the preset's model raises, called directly on its last batch's 1-row chunk (torch.chunk's split)."""
    config = ALL_PRESETS["batchnorm-one-row"].config
    model, loader = tutorial.build(config)
    *_, (batch, _ids) = loader
    x = tutorial.model_input(config, batch)
    one_row = next(c for c in x.chunk(config.gpus, config.dim) if c.shape[config.dim] == 1)
    return last_line(raised_by(lambda: model.train()(one_row)))


DDP_ONE_RANK = textwrap.dedent("""
    import sys, tempfile, torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from dpviz.engines.workload.models import Unused
    dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
    model = DistributedDataParallel(Unused(5, 2))
    try:
        for _ in range(2):
            model(torch.ones(3, 5)).sum().backward()
    except Exception as error:
        print(f"{type(error).__name__}: {str(error).splitlines()[0]}")
    dist.destroy_process_group()
""")


def ddp_oracle() -> str:
    """DistributedDataParallel's own first line for a layer that gets no gradient, on one rank of a plain run."""
    result = subprocess.run([sys.executable, "-c", DDP_ONE_RANK], capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 0 and result.stdout.strip(), result.stderr
    return result.stdout.strip()


def test_dataparallel_line_ends_with_the_replicas_own_error():
    want = batchnorm_oracle()
    assert want.startswith("ValueError: Expected more than 1 value per channel when training")
    line = cli("batchnorm-one-row")
    assert line.startswith("dpviz: DataParallel failed in batch 4 of 4 on 4 simulated devices: ")
    assert line.endswith(f"The replica's own error: {want}"), line
    assert "Caught ValueError in replica 2 on device 2." in line  # which replica: torch's own line, before the cause


def test_ddp_line_ends_with_ddps_own_error_as_far_as_the_line_goes():
    want = ddp_oracle()
    assert want.startswith("RuntimeError: Expected to have finished reduction")
    line = cli("ddp-unused-parameter")
    assert line.startswith("dpviz: DistributedDataParallel failed in step 2 of 4 on 2 ranks: rank 0: RuntimeError: ")
    shown = line.split("rank 0: ", 1)[1]
    assert shown.endswith(" …") and want.startswith(shown[:-2]), (shown, want)  # cut at a whole word, no further
    assert len(shown) <= MESSAGE_LIMIT


def test_a_timeout_between_ranks_ends_with_the_collectives_own_error():
    # No plain run can time out between ranks: the words are gloo's, naming the run's timeout.
    timeout_ms = int(ALL_PRESETS["ddp-uneven"].config.timeout_s * 1000)
    line = cli("ddp-uneven")
    assert line.startswith("dpviz: DistributedDataParallel failed in step 4 of 4 on 3 ranks: rank 0 waited 3 s")
    assert re.search(rf"at the timeout\. The rank's own error: \w+: [^:]*\b{timeout_ms}ms[^:]*$", line), line


def test_the_page_ends_its_failure_boxes_with_the_replicas_own_error():
    want = batchnorm_oracle()
    app = page("batchnorm-one-row")
    assert not app.exception
    [error] = [e.value for e in app.error]  # under the chart: what DataParallel said, then the replica's own
    assert error.startswith("**Batch 4 failed**") and error.endswith(f"The replica's own error: {code_span(want)}")
    assert "\n" not in error
    opening = next(i.value for i in app.info if i.value.startswith("**Pitfall: "))  # above the tabs
    assert opening.endswith(f"Batch 4 failed: {code_span(want)}"), opening


def test_the_page_ends_a_ddp_failure_with_ddps_own_error():
    want = ddp_oracle()
    app = page("ddp-unused-parameter")
    assert not app.exception
    [error] = [e.value for e in app.error]
    shown = re.search(r"(`+)( ?)(RuntimeError: .*)\2\1$", error).group(3)  # the last code span: the cause, cut
    assert error.startswith("**Step 2 failed**") and shown.endswith(" …") and want.startswith(shown[:-2])


def failed(message: str, cause: str = "", type: str = "RuntimeError") -> Trace:
    """A short DataParallel run's trace, given a failure as a file may hold it."""
    trace = record(RunConfig(gpus=2, data_size=4, batch_size=4))
    return dataclasses.replace(trace, failure=Failure(0, type, message, 0, cause))


def test_the_cause_is_the_exception_after_the_last_frame_even_when_it_spans_lines():
    chained = ("Caught RuntimeError in replica 0 on device 0.\nOriginal Traceback (most recent call last):\n"
               '  File "torch/nn/x.py", line 1, in f\n    raise ValueError("inner")\nValueError: inner\n\n'
               "The above exception was the direct cause of the following exception:\n\n"
               'Traceback (most recent call last):\n  File "torch/nn/y.py", line 2, in g\n    raise RuntimeError(m)\n'
               "         ^^^^^^^^^^^^^^^\nRuntimeError: outer words\n  and a second line of them")
    trace = failed(chained)
    assert failure_text(trace) == ("Caught RuntimeError in replica 0 on device 0. The replica's own error: "
                                   "RuntimeError: outer words")


def test_a_long_lead_gives_up_its_room_and_control_characters_stay_escaped():
    trace = failed("rank 0 waited " + "very " * 100 + "long.", cause="RuntimeError: Timed out\x1b[31m")
    lead, joint, cause = failure_parts(trace)
    assert cause == "RuntimeError: Timed out\\x1b[31m" and lead.endswith(" …") and joint == " The replica's own error: "
    assert "\n" not in failure_text(trace) and len(failure_text(trace)) < 2 * MESSAGE_LIMIT


@pytest.mark.parametrize("cause, shown", [
    # gloo's words for the same lesson differ from run to run: a timeout, or a peer that left first
    ("RuntimeError: Timed out waiting 3000ms for recv operation to complete",
     "RuntimeError: Timed out waiting 3000ms for recv operation to complete"),
    ("RuntimeError: Connection closed by peer [127.0.0.1]:28562. This is typically caused by a peer that has exited",
     "RuntimeError: Connection closed by peer [127.0.0.1]:28562."),
])
def test_the_box_above_the_tabs_shows_the_causes_first_sentence_within_its_two_lines(cause, shown):
    from dpviz.page.tabs import OPENING_LIMIT, _cause

    trace = record(RunConfig(gpus=2))
    failed = dataclasses.replace(trace, failure=Failure(batch=0, type="RuntimeError", message="rank 0: " + cause[14:],
                                                        cause=cause))
    lead = "**Pitfall: DDP: ranks with different numbers of batches.** Shown in **Split**. Step 4 failed"
    said = _cause(failed, lead)
    assert said == f": {code_span(shown)}"
    assert len(lead.replace("**", "")) + len(shown) <= OPENING_LIMIT
