"""Short training runs with Adam that the plan and torch's own allocations are held against, recorded once per
test process: catalogue models by name, and "uneven", a model of one's own whose layers have fewer rows than there
are ranks (FSDP2 pads them: Linear(5, 3) and Linear(3, 2) over 4 ranks leave the last rank no real rows).
"""
from __future__ import annotations

from functools import cache

import torch
from torch import nn

from dpviz import record
from dpviz.config import RunConfig
from dpviz.engines import engine
from dpviz.trace import Trace

UNEVEN = "uneven"
ROWS = 8  # rows of the uneven model's example batch: 2 a rank at 4 ranks


def uneven_model() -> tuple[nn.Module, torch.Tensor]:
    """The uneven model and its example batch, the same every call."""
    generator = torch.Generator().manual_seed(0)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(5, 3), nn.ReLU(), nn.Linear(3, 2))
    return model, torch.randn(ROWS, 5, generator=generator)


@cache
def live(engine_name: str, model: str, gpus: int, precision: str = "full") -> Trace | None:
    """One training run of `model` under `engine_name` on `gpus` devices with Adam (None when the engine refuses
    the model: a DataParallel pitfall's model is not one a rank runs, and the other way round), in `precision`."""
    if model == UNEVEN:
        module, batch = uneven_model()
        trace = record(module, batch, engine=engine_name, gpus=gpus, train=True, optimizer="adam",
                       **({"backend": "simulated"} if engine_name == "dp" else {}))
        assert trace.failure is None, trace.failure
        return trace
    settings = {"find_unused": True} if engine_name in ("ddp", "zero1") and model == "unused" else {}
    settings["precision"] = precision
    if engine_name == "dp":
        settings["backend"] = "simulated"
    try:
        config = RunConfig(engine=engine_name, model=model, gpus=gpus, train=True, optimizer="adam",
                           data_size=2 * gpus, batch_size=2 * gpus, **settings)
    except ValueError:
        return None
    trace = engine(engine_name).record(config)
    assert trace.failure is None, trace.failure
    return trace


def held(trace: Trace, kind: str) -> list[int]:
    """Bytes of `kind` each device held: a rank's facts["held"], or what DataParallel's ledger says a device held
    of it at its fullest sample (parameters: the module and a replica's copies)."""
    if trace.facts.get("held"):
        return [rank[kind]["bytes"] for rank in trace.facts["held"]]
    kinds = ("parameters", "parameter copies") if kind == "parameters" else (kind,)
    out = []
    for lane in trace.lanes:
        samples = [m for m in trace.memory if m.lane == lane.id]
        moments = {(m.batch, m.phase) for m in samples}
        out.append(max((sum(m.bytes for m in samples if (m.batch, m.phase) == at and m.category in kinds)
                        for at in moments), default=0))
    return out


@cache
def live_pipeline(model: str, stages: int, optimizer: str, schedule: str, microbatches: int) -> Trace:
    """A pipeline's training run of `model` cut into `stages` stages: 2 steps of ROWS rows (the plan's example
    batch), so that every step's sends and the activations kept in the first and last are recorded."""
    config = RunConfig(engine="pipeline", model=model, gpus=stages, train=True, optimizer=optimizer, data_size=2 * ROWS,
                       batch_size=ROWS, schedule=schedule, microbatches=microbatches)
    trace = engine("pipeline").record(config)
    assert trace.failure is None, trace.failure
    return trace
