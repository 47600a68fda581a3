"""The zero1 engine against torch: ZeroRedundancyOptimizer over real DistributedDataParallel on real gloo processes.

Every rank must end with the same parameters, equal to one process training on each step's global batch
with the whole optimizer (ZeRO-1 changes where the optimizer's state lives, not what the step computes),
with SGD and with Adam. The command line and the page offer the engine and the optimizer from the registry.
"""
from __future__ import annotations

import functools

import pytest
import torch

from dpviz.cli import main
from dpviz.config import RunConfig
from dpviz.trace import json_io as trace_json
from dpviz.engines.ddp.launch import launch
from dpviz.engines.ddp.merge import to_trace
from dpviz.engines.workload import tutorial_data as tutorial

from test_ddp_engine import TOLERANCE, single_process


@functools.cache
def run(**settings):
    """One real run of 2 ranks: the launcher's reports (with each rank's final parameters) and its trace."""
    config = RunConfig(engine="zero1", gpus=2, train=True, **settings)
    launched = launch(config, keep_parameters=True)
    trace = to_trace(config, launched, backend="cpu", torch_version=torch.__version__, machine_gpus=0)
    return config, launched, trace


def final_parameters(launched) -> list[dict[str, torch.Tensor]]:
    return [{name: torch.from_numpy(value) for name, value in report["parameters"].items()}
            for report in launched["ranks"]]


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_every_rank_ends_equal_to_one_process_on_the_global_batch(optimizer):
    config, launched, trace = run(batch_size=20, data_size=60, optimizer=optimizer)
    assert trace.failure is None and launched["exit_codes"] == [0, 0] and trace.engine == "zero1"
    first, second = final_parameters(launched)
    for name, value in first.items():
        assert torch.equal(second[name], value), f"{name} differs between ranks"
    expected = single_process(config, trace)
    for name, value in first.items():
        assert torch.allclose(value, expected[name].detach(), atol=TOLERANCE, rtol=0), name
    assert not torch.allclose(first["fc.weight"], tutorial.build(config)[0].fc.weight.detach())  # it trained


def test_the_command_line_runs_zero1_with_adam(tmp_path, capsys):
    assert main(["--engine", "zero1", "--optimizer", "adam", "--train", "--gpus", "2", "--data-size", "20",
                 "--trace", str(tmp_path / "run.json")]) == 0
    trace = trace_json.loads((tmp_path / "run.json").read_text())
    assert (trace.engine, trace.config.optimizer, trace.spec.label) == ("zero1", "adam", "ZeRO-1")
    assert "Let's use 2 ranks!" in capsys.readouterr().out


def test_the_page_offers_zero1_and_the_optimizer():
    from test_app import page

    app = page(engine="zero1", gpus="2", train="true", optimizer="adam")
    assert not app.exception and app.header[0].value == "How ZeRO-1 shares the optimizer's state"
    assert app.radio(key="engine_choice").value == "zero1" and app.radio(key="optimizer").value == "adam"
    assert app.get("plotly_chart") and app.query_params["optimizer"] == "adam"
    app.radio(key="optimizer").set_value("sgd").run()
    assert not app.exception and app.query_params["optimizer"] == "sgd" and app.query_params["engine"] == "zero1"
