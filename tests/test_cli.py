"""python -m dpviz: the tutorial log on stdout, trace files on request, exit 2 and one line for bad input."""
import json
import subprocess
import sys

import pytest

from dpviz import RunConfig, record, trace_json
from dpviz.cli import build_parser, main


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "dpviz", *args], capture_output=True, text=True, cwd=cwd)


def test_prints_the_log_and_writes_both_files(tmp_path):
    result = run("--gpus", "3", "--seed", "4", "--trace", str(tmp_path / "t.json"), "--chrome-trace", str(tmp_path / "c.json"))
    assert result.returncode == 0, result.stderr
    trace = trace_json.loads((tmp_path / "t.json").read_text())
    assert trace.config == RunConfig(gpus=3, seed=4)
    assert [b.sample_ids for b in trace.batches] == [b.sample_ids for b in record(RunConfig(gpus=3, seed=4)).batches]
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Let's use 3 GPUs!") and lines[-1].startswith("Outside: input size torch.Size([10, 5])")
    assert len(lines) == 1 + 4 * 4
    assert json.loads((tmp_path / "c.json").read_text())["traceEvents"]
    assert "4 batches on 3 simulated devices" in result.stderr


@pytest.mark.parametrize("args,words", [
    (["--gpus", "0"], "gpus must be between 1 and 16"),
    (["--gpus", "17"], "gpus must be between 1 and 16"),
    (["--batch-size", "-3"], "batch_size must be between"),
    (["--data-size", "ten"], "data_size must be a whole number"),
    (["--input-size", "2.5"], "input_size must be a whole number"),
    (["--data-size", "1000000", "--batch-size", "1"], "raise the batch size"),
    (["--backend", "cuda", "--gpus", "16"], "needs 16 CUDA devices"),
    (["--backend", "tpu"], "invalid choice"),
    (["--trace", "/no/such/folder/t.json"], "does not exist"),
    (["--chrome-trace", "/tmp"], "it is a folder"),
    (["--frobnicate"], "unrecognized arguments"),
])
def test_bad_input_is_one_line_and_exit_2(args, words, capsys):
    with pytest.raises(SystemExit) as exit:  # any other exception would be a traceback
        main(args)
    out, err = capsys.readouterr()
    assert exit.value.code == 2 and out == ""
    assert words in err and len(err.strip().splitlines()) == 1


def test_a_bad_value_in_a_real_process_has_no_traceback():
    result = run("--gpus", "many")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == "python -m dpviz: argument --gpus: gpus must be a whole number between 1 and 16, got 'many'.\n"


def test_help_explains_every_option():
    text = build_parser().format_help()
    for option in build_parser()._option_string_actions:
        assert option in text
    for words in ("1 to 16", "1,000,000", "simulated", "Perfetto"):
        assert words in text
