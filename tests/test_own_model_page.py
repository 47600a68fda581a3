"""The page opens a trace of a module of the user's own: named with `streamlit run app.py -- --trace run.json`, or
uploaded. The page reads the file only: it never imports or runs the module."""
import sys

import pytest
import torch
from streamlit.testing.v1 import AppTest
from torch import nn

import dpviz
from dpviz.trace import json_io
from test_app import TABS, TIMEOUT, shown_text, split_rows

TORCH_SEED = 3


class Scorer(nn.Module):
    """A module defined here, in no file the page could import."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 2))

    def forward(self, batch):
        return self.net(batch["features"]) * batch["weight"][:, None]


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    torch.manual_seed(TORCH_SEED)
    batch = {"features": torch.randn(9, 6), "weight": torch.rand(9)}
    trace = dpviz.record(Scorer(), batch, gpus=4, train=True, data_size=20)
    path = tmp_path_factory.mktemp("own") / "run.json"
    path.write_text(json_io.dumps(trace))
    return path, trace


def started_with(monkeypatch, *argv: str) -> AppTest:
    monkeypatch.setattr(sys, "argv", ["app.py", *argv])  # what `streamlit run app.py -- ...` leaves the page
    return AppTest.from_file("../app.py", default_timeout=TIMEOUT).run()


def test_a_trace_named_on_the_command_line_opens_and_draws_every_view(monkeypatch, trace_file):
    path, trace = trace_file
    app = started_with(monkeypatch, "--trace", str(path))
    assert not app.exception
    expected = [[s.rows for s in trace.replicas(b.index)] for b in trace.batches]
    assert split_rows(app) == expected == [[3, 3, 3], [3, 3, 3], [1, 1]]
    for label in TABS[1:] + TABS[:1]:
        app.session_state["tab"] = label
        app.run()
        assert not app.exception, label
        assert app.get("plotly_chart") or label in ("Tutorial log",), label


def test_a_bad_path_is_one_sentence_and_the_live_run_is_shown(monkeypatch, tmp_path):
    app = started_with(monkeypatch, "--trace", str(tmp_path / "missing.json"))
    assert not app.exception
    warnings = [w.value.replace("\\", "") for w in app.warning]  # markdown escapes taken out
    assert len(warnings) == 1 and "could not be opened: there is no such file." in warnings[0]
    assert split_rows(app)  # the live run instead


def test_an_uploaded_trace_of_your_own_model_is_shown(monkeypatch, trace_file):
    path, trace = trace_file
    app = started_with(monkeypatch)
    assert "python -m dpviz --model my_model.py:build" in shown_text(app)  # how to record one's own
    app.file_uploader[0].upload("run.json", path.read_bytes(), "application/json").run()
    assert not app.exception
    assert split_rows(app) == [[3, 3, 3], [3, 3, 3], [1, 1]]
