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
    (["--engine", "ddp"], "invalid choice: 'ddp'"),
    (["--trace", "/no/such/folder/t.json"], "does not exist"),
    (["--chrome-trace", "/tmp"], "it is a folder"),
    (["--trace", "t" * 300 + ".json"], "file name too long"),  # one part over the file system's 255 bytes
    (["--chrome-trace", "d" * 300 + "/t.json"], "file name too long"),
    (["--trace", "/no/such\nfolder/t.json"], "folder /no/such\\nfolder does not exist"),  # escaped: one line
    (["--trace", "t\x00.json"], "cannot hold a NUL byte"),
    (["--chrome-trace", "/proc/dpviz-t.json"], "cannot write /proc/dpviz-t.json"),  # refused before the run prints
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


def test_an_overlong_path_is_cut_in_the_one_line_message(capsys):
    with pytest.raises(SystemExit):
        main(["--trace", "x" * 5000])
    err = capsys.readouterr().err
    assert "file name too long" in err and len(err) < 200


@pytest.mark.parametrize("option", ["--preset", "--model", "--engine", "--backend", "--inputs"])
def test_a_long_refused_choice_is_cut_in_the_one_line_message(option, capsys):
    with pytest.raises(SystemExit) as exit:
        main([option, "x" * 100_000])
    err = capsys.readouterr().err
    assert exit.value.code == 2 and len(err.strip().splitlines()) == 1 and len(err) < 400 and "x" * 80 + "…" in err


@pytest.mark.parametrize("argv", [["--\x1b[2J"], ["--" + "z" * 100_000], ["--trace", "/no/\x1b[31mred/t.json"]])
def test_control_characters_and_long_words_are_shown_escaped_and_cut(argv, capsys):
    with pytest.raises(SystemExit) as exit:
        main(argv)
    err = capsys.readouterr().err
    assert exit.value.code == 2 and len(err.strip().splitlines()) == 1 and len(err) < 400
    assert "\x1b" not in err and all(c.isprintable() for c in err.strip())


def test_help_explains_every_option():
    text = build_parser().format_help()
    for option in build_parser()._option_string_actions:
        assert option in text
    for words in ("1 to 16", "1,000,000", "simulated", "Perfetto"):
        assert words in text


def test_a_preset_that_dataparallel_fails_prints_the_error_writes_the_trace_and_exits_1(tmp_path):
    result = run("--preset", "kwargs-small-batch", "--trace", str(tmp_path / "t.json"))
    assert result.returncode == 1
    trace = trace_json.loads((tmp_path / "t.json").read_text())
    assert trace.failure is not None and trace.failure.batch == 3
    lines = result.stdout.splitlines()
    assert lines[-1] == trace.failure.original  # the replica's own error closes the log, as Python prints it
    assert f"{trace.failure.type}: {trace.failure.message.splitlines()[0]}" in lines
    assert "/work/" not in result.stdout  # tracebacks name torch/... and dpviz/..., not the machine's folders
    assert f"failed in batch 3 of 4 on 8 simulated devices: {trace.failure.headline}" in result.stderr


def test_options_given_with_a_preset_override_it(tmp_path):
    result = run("--preset", "kwargs-small-batch", "--gpus", "2", "--trace", str(tmp_path / "t.json"))
    assert result.returncode == 0, result.stderr
    config = trace_json.loads((tmp_path / "t.json").read_text()).config
    assert (config.inputs, config.gpus) == ("kwargs", 2)


@pytest.mark.parametrize("args,words", [
    (["--model", "transformer"], "invalid choice"),
    (["--inputs", "hidden"], "needs model gru or gru_dim1"),
    (["--preset", "nope"], "invalid choice"),
    (["--model", "cnn", "--input-size", "1024", "--data-size", "17"], "the limit is 16,777,216"),
])
def test_bad_models_inputs_and_presets_exit_2_with_one_line(args, words):
    result = run(*args)
    assert result.returncode == 2 and words in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_an_abbreviated_option_is_refused_not_silently_dropped():
    result = run("--preset", "idle-gpus", "--gpu", "3")
    assert result.returncode == 2 and "unrecognized arguments: --gpu" in result.stderr
