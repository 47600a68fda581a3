"""`python -m dpviz --model FILE.py:FUNCTION`: a module of the user's own through the real command line, and every
way it cannot run said in one line with status 2 (1 for the model's own error during the run, quoted)."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# One run imports torch and the user's file (seconds); a DDP run also starts 2 rank processes.
TIMEOUT = 300

MODELS = '''
import dataclasses
import torch
from torch import nn

class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.lstm, self.head = nn.Embedding(50, 16), nn.LSTM(16, 16, batch_first=True), nn.Linear(16, 50)
    def forward(self, tokens):
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out)

def build():
    return TinyLM()

def tokens():
    return torch.randint(0, 50, (8, 12))

def next_token(output, tokens):
    return nn.functional.cross_entropy(output[:, :-1].reshape(-1, 50), tokens[:, 1:].reshape(-1))

@dataclasses.dataclass
class Batch:
    x: torch.Tensor

class OnField(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
    def forward(self, batch):
        return self.fc(batch.x)

def on_field():
    return OnField()

def dataclass_batch():
    return Batch(torch.randn(6, 4))

def huge():
    model = nn.Linear(4, 2)
    model.register_buffer("table", torch.zeros(1).expand(10**13))  # 40 TB claimed, nothing allocated
    return model

def batchnorm():
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8))

def raises():
    raise ValueError("no weights here")

def misdeclared():
    model = TinyLM()
    model.pipeline_layers = ["embed", "lstm", "tail"]  # no module 'tail'
    return model

def misplanned():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    model.tp_plan = {"0": "colwise", "1": "rowwise"}  # a ReLU, not a Linear
    return model

def nothing():
    return None
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("own") / "my_models.py"
    path.write_text(textwrap.dedent(MODELS))
    return path


def dpviz(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dpviz", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=TIMEOUT)


def refused(result: subprocess.CompletedProcess, *words: str) -> None:
    """Status 2 and one line naming the cause, no traceback."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.parametrize("engine", ["dp", "ddp"])
def test_a_language_model_from_a_file_trains_and_writes_a_trace_that_names_it(models, tmp_path, engine):
    out = tmp_path / "run.json"
    result = dpviz("--model", f"{models}:build", "--example", f"{models}:tokens", "--loss", f"{models}:next_token",
                   "--train", "--gpus", "2", "--engine", engine, "--data-size", "12", "--trace", str(out))
    assert result.returncode == 0, result.stderr
    assert "your model TinyLM (" in result.stderr
    text = out.read_text()
    document = json.loads(text)
    fact = document["facts"]["model"]
    assert fact["class"] == "TinyLM" and fact["parameters"] == 50 * 16 + 4 * 16 * 32 + 8 * 16 + 16 * 50 + 50
    assert fact["rows"] == 8 and document["config"]["batch_size"] == 8 and document["config"]["data_size"] == 12
    assert "def forward" not in text and "cross_entropy" not in text and str(models) not in text  # never its code


@pytest.mark.parametrize("args, words", [
    (["--model", "/nowhere/models.py:build"], ["--model: no file /nowhere/models.py."]),
    (["--model", "no_such_package.models:build"], ["no module named 'no_such_package.models'"]),
    (["--model", "{models}:missing"], ["has no 'missing'"]),
    (["--model", "{models}:raises"], ["raises raised ValueError: no weights here."]),
    (["--model", "{models}:nothing"], ["nothing returned None, not a torch.nn.Module."]),
    (["--model", "{models}:tokens"], ["returned a torch.Tensor, not a torch.nn.Module."]),
    (["--model", "{models}:on_field", "--example", "{models}:dataclass_batch"],
     ["DataParallel cannot scatter this batch", "dataclass (Batch)"]),
    (["--model", "{models}:huge", "--input-size", "4"], ["need about", "left; use fewer devices or a smaller model."]),
    (["--model", "{models}:build"], ["forward on the example batch raised RuntimeError"]),  # floats into an Embedding
    (["--model", "{models}:build", "--example", "{models}:tokens", "--train", "--loss", "{models}:build"],
     ["the loss, called as loss(output, batch) on the example batch, raised TypeError"]),
    (["--example", "{models}:tokens"], ["--example needs --model FILE.py:FUNCTION"]),
    # A pipeline cuts an nn.Sequential into its children: another module, or too few children, before any stage starts
    (["--model", "{models}:build", "--example", "{models}:tokens", "--engine", "pipeline", "--train", "--gpus", "2"],
     ["your model is a TinyLM, not an nn.Sequential"]),
    (["--model", "{models}:batchnorm", "--engine", "pipeline", "--train", "--gpus", "3", "--input-size", "4"],
     ["your model has 2 layers, so it cannot be cut into 3 stages"]),
    # What a module declares of how it is split is held to the module, whatever the engine
    (["--model", "{models}:misdeclared", "--example", "{models}:tokens", "--engine", "pipeline", "--train"],
     ["pipeline_layers names 'tail', which is no module of your TinyLM"]),
    (["--model", "{models}:misplanned", "--input-size", "4"], ["tp_plan names '1', a ReLU, not an nn.Linear"]),
])
def test_what_cannot_run_is_one_line_and_status_2(models, args, words):
    refused(dpviz(*(a.format(models=models) for a in args)), *words)


def test_a_preset_runs_a_module_of_ones_own_on_its_settings(models, tmp_path):
    # A pipeline preset's stages, schedule and microbatches, the module and batch one's own (4 rows a microbatch).
    out = tmp_path / "run.json"
    result = dpviz("--preset", "pipeline-bubble", "--model", f"{models}:batchnorm", "--input-size", "4", "--gpus", "2",
                   "--batch-size", "8", "--data-size", "16", "--trace", str(out))
    assert result.returncode == 0, result.stderr
    config = json.loads(out.read_text())["config"]
    assert (config["engine"], config["model"], config["microbatches"], config["gpus"]) == ("pipeline", "own", 4, 2)


def test_debug_adds_the_traceback(models):
    result = dpviz("--model", f"{models}:raises", "--debug")
    assert result.returncode == 2 and "Traceback" in result.stderr and "no weights here" in result.stderr


def test_a_forward_that_fails_on_one_chunk_is_status_1_quoting_the_models_error(models):
    # 7 rows over 4 devices: chunks of 2, 2, 2, 1, and BatchNorm1d cannot train on one row.
    result = dpviz("--model", f"{models}:batchnorm", "--input-size", "4", "--batch-size", "7", "--gpus", "4", "--train")
    assert result.returncode == 1, result.stderr
    assert "Traceback (most recent call last)" not in result.stderr
    assert "Expected more than 1 value per channel when training" in result.stdout + result.stderr


def test_ddp_runs_a_dataclass_batch_that_dataparallel_refuses(models):
    result = dpviz("--model", f"{models}:on_field", "--example", f"{models}:dataclass_batch", "--engine", "ddp")
    assert result.returncode == 0, result.stderr
