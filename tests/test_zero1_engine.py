"""The zero1 engine against torch: ZeroRedundancyOptimizer over real DistributedDataParallel on real gloo processes.

Every rank must end with the same parameters, equal to one process training on each step's global batch
with the whole optimizer (ZeRO-1 changes where the optimizer's state lives, not what the step computes).
"""
from __future__ import annotations

import functools

import torch

from dpviz.config import RunConfig
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


def test_every_rank_ends_equal_to_one_process_on_the_global_batch():
    config, launched, trace = run(batch_size=20, data_size=60)
    assert trace.failure is None and launched["exit_codes"] == [0, 0] and trace.engine == "zero1"
    first, second = final_parameters(launched)
    for name, value in first.items():
        assert torch.equal(second[name], value), f"{name} differs between ranks"
    expected = single_process(config, trace)
    for name, value in first.items():
        assert torch.allclose(value, expected[name].detach(), atol=TOLERANCE, rtol=0), name
    assert not torch.allclose(first["fc.weight"], tutorial.build(config)[0].fc.weight.detach())  # it trained
