"""python -m dpviz: the tutorial log on stdout, trace files on request, exit 2 and one line for bad input."""
import contextlib
import io
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from dpviz import RunConfig, record
from dpviz.trace import json_io as trace_json
from dpviz.cli import build_parser, main
from dpviz.engines import ENGINES
from dpviz.presets import DDP_PRESETS


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
    (["--engine", "fsdp3"], "invalid choice: 'fsdp3'"),
    (["--engine", "ddp", "--gpus", "17"], "gpus must be between 1 and 16, got 17"),
    (["--engine", "ddp", "--backend", "cuda", "--gpus", "16"], "16 ranks need 16 CUDA devices"),
    (["--engine", "ddp", "--inputs", "kwargs"], "inputs kwargs shows a DataParallel pitfall"),
    (["--engine", "ddp", "--inputs", "list"], "inputs list shows a DataParallel pitfall"),
    (["--bucket-cap-mb", "1"], "--bucket-cap-mb is an option of DistributedDataParallel and ZeRO-1, so it needs --engine ddp or --engine zero1"),
    (["--bucket-cap-mb", "none"], "--bucket-cap-mb is an option of DistributedDataParallel and ZeRO-1"),  # even DDP's default
    (["--accumulate", "1", "--train"], "--accumulate is an option of DistributedDataParallel and ZeRO-1"),
    (["--drop-last"], "--drop-last is an option of DistributedDataParallel, ZeRO-1 and FSDP, so it needs --engine ddp or --engine zero1 or --engine fsdp"),
    (["--no-set-epoch"], "--no-set-epoch is an option of DistributedDataParallel, ZeRO-1 and FSDP"),  # on unless given: --no-
    (["--timeout-s", "30"], "--timeout-s is an option of DistributedDataParallel, ZeRO-1, FSDP, Pipeline and Tensor parallel"),
    (["--engine", "ddp", "--uneven"], "uneven splits the rows by hand into contiguous shards, in order, so it needs shuffle"),
    (["--engine", "ddp", "--epochs", "5"], "epochs must be between 1 and 4"),
    (["--engine", "ddp", "--bucket-cap-mb", "0"], "bucket_cap_mb must be a number of MiB from 0.0001 to 1024"),
    (["--engine", "ddp", "--bucket-cap-mb", "nan"], "got nan"),
    (["--engine", "ddp", "--bucket-cap-mb", "big"], "bucket_cap_mb must be a number of MiB from 0.0001 to 1024 (or none), got 'big'"),
    (["--engine", "ddp", "--accumulate", "2"], "accumulate 2 sums gradients over 2 steps before one all-reduce, so it needs train"),
    (["--engine", "ddp", "--train", "--accumulate", "65"], "accumulate must be between 1 and 64"),
    (["--engine", "ddp", "--preset", "idle-gpus"], "--preset idle-gpus shows a DataParallel pitfall"),
    (["--preset", "kwargs-small-batch", "--engine", "ddp"], "--preset kwargs-small-batch shows a DataParallel pitfall"),
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
    for words in ("1 to 16", "1,000,000", "simulated", "Perfetto", "ranks: one process each", "torchrun", "0.0001 to 1024"):
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
    # What DataParallel said, then the replica's own error: the line ends as the log does
    assert result.stderr.strip().splitlines()[-1].endswith(
        f"failed in batch 4 of 4 on 8 simulated devices: {trace.failure.message.splitlines()[0]} "
        f"The replica's own error: {trace.failure.original}")


def test_options_given_with_a_preset_override_it(tmp_path):
    result = run("--preset", "kwargs-small-batch", "--gpus", "2", "--trace", str(tmp_path / "t.json"))
    assert result.returncode == 0, result.stderr
    config = trace_json.loads((tmp_path / "t.json").read_text()).config
    assert (config.inputs, config.gpus) == ("kwargs", 2)


@pytest.mark.parametrize("args,words", [
    (["--model", "resnet"], "model must be one of linear, mlp"),
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


# ---- --engine ddp: the real DistributedDataParallel, one process per rank

@pytest.fixture(scope="module")
def ddp_cli(tmp_path_factory):
    """One in-process DDP run through main(): 3 ranks training with a tiny bucket cap, both files written."""
    folder = tmp_path_factory.mktemp("ddp")
    trace, chrome = folder / "t.json", folder / "c.json"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--engine", "ddp", "--gpus", "3", "--train", "--bucket-cap-mb", "0.0001", "--model", "mlp",
                     "--data-size", "90", "--trace", str(trace), "--chrome-trace", str(chrome)])
    return code, out.getvalue(), err.getvalue(), trace, chrome


def test_ddp_prints_a_line_per_rank_and_step_and_writes_both_files(ddp_cli):
    code, out, err, trace_path, chrome_path = ddp_cli
    assert code == 0, err
    trace = trace_json.loads(trace_path.read_text())
    assert trace.engine == "ddp" and trace.config.bucket_cap_mb == 0.0001 and trace.config.gpus == 3
    lines = out.splitlines()
    # 90 rows on 3 ranks: 30 each, in batches of ceil(30 / 3) = 10: 3 steps of a line per rank and a closing line.
    assert lines[0].startswith("Let's use 3 ranks! (3 processes on the CPU, gloo; each rank loads ceil(30 / 3) = 10 rows")
    assert len(lines) == 1 + 3 * (3 + 1)
    assert sorted(line for line in lines if line.startswith("rank ")) == sorted(
        f"rank {r}: input size torch.Size([10, 5]) output size torch.Size([10, 2])" for r in range(3) for _ in range(3))
    assert err == f"dpviz: 3 steps on 3 ranks (processes on the CPU, gloo) in {trace.duration:.3f} s.\n"
    assert "GPU" not in out + err
    processes = [e["args"]["name"] for e in json.loads(chrome_path.read_text())["traceEvents"] if e["name"] == "process_name"]
    assert processes == [lane.name for lane in trace.lanes] == [f"rank {r} (process on the CPU)" for r in range(3)]


def test_a_failing_rank_prints_the_log_to_its_error_and_exits_1(tmp_path, capsys):
    code = main(["--engine", "ddp", "--train", "--model", "unused", "--trace", str(tmp_path / "t.json")])
    out, err = capsys.readouterr()
    assert code == 1
    trace = trace_json.loads((tmp_path / "t.json").read_text())
    # A layer forward never uses: step 0 cannot all-reduce it, and step 1's forward raises on every rank.
    assert trace.failure is not None and trace.failure.batch == 1 and trace.failure.type == "RuntimeError"
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("dpviz: DistributedDataParallel failed in step 2 of 4 on 2 ranks: rank ")
    assert "Expected to have finished reduction in the prior iteration" in err and len(err) < 400
    lines = out.splitlines()
    assert lines[-len(trace.failure.message.splitlines()):][0] == f"RuntimeError: {trace.failure.message.splitlines()[0]}"
    assert "Traceback (most recent call last):" in lines
    # The failed step opens with its line, which claims no all-reduce; the traceback follows it.
    failed = next(i for i, line in enumerate(lines) if line.startswith("Step 2 of 4"))
    assert lines[failed].endswith("and it failed:") and "all-reduce" not in lines[failed]
    assert lines.index("Traceback (most recent call last):") > failed


def test_every_ddp_option_the_page_has_is_a_flag_too(tmp_path, capsys):
    # The flags come from the engine's own declaration of its options: the ddp-drop-last preset, by hand.
    preset = DDP_PRESETS["ddp-drop-last"].config
    assert main(["--engine", "ddp", "--gpus", "3", "--data-size", "10", "--batch-size", "6", "--no-shuffle",
                 "--drop-last", "--trace", str(tmp_path / "run.json")]) == 0
    assert trace_json.loads((tmp_path / "run.json").read_text()).config == preset
    flags = build_parser()._option_string_actions
    for option in ENGINES["ddp"].options:
        assert any(option.name.replace("_", "-") in flag for flag in flags), option.name


def test_a_ddp_preset_runs_on_ranks(capsys):
    assert main(["--preset", "ddp-padding"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("Let's use 3 ranks!") and "(2 repeated by the sampler's padding)" in out
    assert "2 steps on 3 ranks (processes on the CPU, gloo)" in err


def _processes_with(marker: str) -> list[int]:
    """Processes whose environment holds `marker` (those a run started, and what they started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:  # gone, or not ours to read
                pass
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads processes' environments from /proc")
def test_ddp_in_a_real_process_has_no_traceback_and_leaves_no_process():
    marker = f"DPVIZ_TEST_RUN={uuid.uuid4().hex}"
    env = {**os.environ, marker.split("=")[0]: marker.split("=")[1]}
    result = subprocess.run([sys.executable, "-m", "dpviz", "--engine", "ddp", "--gpus", "2", "--no-shuffle"],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("dpviz: 4 steps on 2 ranks (processes on the CPU, gloo) in ")
    assert len(result.stderr.splitlines()) == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 1 + 4 * 3 and lines[-3].startswith("Step 4 of 4: 10 rows on 2 ranks")
    # The ranks and the forkserver they came from end with the command (the forkserver on seeing its
    # parent gone, so give it a moment).
    deadline = time.monotonic() + 10
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_with(marker) == []
