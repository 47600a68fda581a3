"""Every engine at the same settings steps the same optimizer: DataParallel takes the run's optimizer as DDP,
ZeRO-1 and FSDP do, and what each holds of its state is torch's own state for that optimizer on the model alone
(held once by DDP's every rank, shared out by ZeRO-1 and FSDP, on GPU 0 under DataParallel)."""
from __future__ import annotations

import pytest
import torch

from dpviz.config import RunConfig
from dpviz.config import ConfigError
from dpviz.engines import ENGINES, engine
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.engines.workload.models import build_model
from dpviz.page.running import same_settings

GPUS = 2


def torch_state_bytes(config: RunConfig) -> int:
    """The optimizer's state after one step of the model alone, per element of its parameters (Adam's step
    counters left out, as every engine's count leaves them out)."""
    model, _ = build_model(config.model, config.input_size, config.output_size)
    kind, settings = tutorial.optimizer_of(config)
    optimizer = kind(model.parameters(), **settings)
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    optimizer.step()
    return sum(t.numel() * t.element_size() for state in optimizer.state.values() for t in state.values() if t.dim() > 0)


def held_state(trace) -> int:
    """The whole model's optimizer state as the run held it: GPU 0's under DataParallel, rank 0's under DDP (every
    rank holds it all), every rank's shares summed under ZeRO-1 and FSDP."""
    if trace.engine == "dp":
        return max(m.bytes for m in trace.memory if m.category == "optimizer state" and m.lane == 0)
    held = [rank["optimizer state"]["bytes"] for rank in trace.facts["held"]]
    return held[0] if trace.engine == "ddp" else sum(held)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_every_engine_holds_torchs_own_state_of_the_chosen_optimizer(optimizer):
    base = RunConfig(engine="ddp", model="mlp", gpus=GPUS, train=True, optimizer=optimizer, data_size=8, batch_size=8,
                     backend="auto")
    expected = torch_state_bytes(base)
    ran = []
    for name, spec in ENGINES.items():
        try:
            config = same_settings(base, name)  # what the page "Memory, every engine" runs under each engine
        except ConfigError:  # an engine that cannot run the MLP (tensor parallelism: its BatchNorm) is not on that page
            assert not spec.memory_page, name
            continue
        ran.append(name)
        assert config.optimizer == optimizer, name
        trace = engine(name).record(config)
        assert trace.failure is None, (name, trace.failure)
        assert held_state(trace) == expected, name
    assert {name for name, spec in ENGINES.items() if spec.memory_page} <= set(ran)
    assert expected == (2 if optimizer == "adam" else 1) * sum(
        p.numel() * p.element_size() for p in build_model("mlp", 5, 2)[0].parameters())
