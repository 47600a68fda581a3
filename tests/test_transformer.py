"""The catalogue's transformer (token ids in, blocks in an nn.ModuleList) under every engine, against torch.

Under DDP, ZeRO-1 and FSDP every rank must end with the parameters of one process training on each step's global
batch; under DataParallel a training step equals a plain one (tests/test_models.py) and a recorded run's trace
passes DataParallel's torch-free split rules. FSDP shards it block by block: each block is one sharded module,
gathered whole for its forward, and the spans of a step name every block.
"""
from __future__ import annotations

import functools

import pytest
import torch

from dpviz.config import ConfigError, RunConfig
from dpviz.engines.ranks.launch import launch
from dpviz.engines.ddp.merge import to_trace
from dpviz.engines.dp.split_rules import replica_rows
from dpviz.engines.workload.units import shard_units
from dpviz.engines.run import record
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.engines.workload.models import BLOCKS
from dpviz.trace import json_io as trace_json

from test_ddp_engine import TOLERANCE, single_process

SETTINGS = dict(model="transformer", input_size=11, batch_size=12, data_size=36, optimizer="adam")


@functools.cache
def run(engine: str, ranks: int = 2):
    config = RunConfig(engine=engine, gpus=ranks, train=True, **SETTINGS)
    launched = launch(config, keep_parameters=True)
    trace = to_trace(config, launched, backend="cpu", torch_version=torch.__version__, machine_gpus=0)
    return config, launched, trace


def test_its_rows_are_token_ids_below_the_input_size():
    config = RunConfig(engine="ddp", **SETTINGS)
    data = tutorial.build(config)[1].dataset.data
    assert data.dtype == torch.long and data.shape == (36, 6) and 0 <= data.min() and data.max() < 11
    assert config.row_text == "6 token ids below 11"


@pytest.mark.parametrize("inputs", ["tuple", "dict", "kwargs"])
def test_forms_that_scale_the_input_are_refused_in_one_sentence(inputs):
    with pytest.raises(ConfigError, match=f"model transformer takes token ids, which inputs {inputs} would scale"):
        RunConfig(model="transformer", inputs=inputs)


@pytest.mark.parametrize("engine", ["ddp", "zero1", "fsdp"])
def test_every_rank_ends_equal_to_one_process_on_the_global_batch(engine):
    config, launched, trace = run(engine)
    assert trace.failure is None and launched["exit_codes"] == [0, 0] and trace.engine == engine
    first, second = [{name: torch.from_numpy(value) for name, value in report["parameters"].items()}
                     for report in launched["ranks"]]
    expected = single_process(config, trace)
    assert first.keys() == expected.keys()
    for name, value in first.items():
        assert torch.equal(second[name], value), f"{name} differs between ranks"
        assert torch.allclose(value, expected[name].detach(), atol=TOLERANCE, rtol=0), name
    untrained = dict(tutorial.build(config)[0].named_parameters())
    assert not torch.allclose(first["blocks.0.attention.wq.weight"], untrained["blocks.0.attention.wq.weight"])  # it trained
    trace_json.loads(trace_json.dumps(trace))  # the engine's own check takes it


def test_fsdp_shards_it_block_by_block_and_its_spans_name_every_block():
    config, _, trace = run("fsdp")
    units = shard_units(tutorial.build(config)[0])
    names = [name for name, _ in units]
    assert names == ["embed", "position", *(f"blocks.{i}" for i in range(BLOCKS)), "norm", "head"]
    blocks = [index for index, name in enumerate(names) if name.startswith("blocks.")]
    largest = max(whole(unit) for _, unit in units)
    sampled = sorted({m.batch for m in trace.memory if m.phase == "gather"})
    assert sampled
    for step in range(len(trace.batches)):
        for rank in range(2):
            named = {s.group for s in trace.spans_of(step) if s.lane == rank and s.phase == "gather"}
            assert named == set(range(len(units)))  # one all-gather per sharded module, every block among them
            reduced = {s.group for s in trace.spans_of(step) if s.lane == rank and s.phase == "reduce_scatter"}
            assert set(blocks) <= reduced
            if step not in sampled:
                continue
            held = {m.category: m.bytes for m in trace.memory if (m.batch, m.phase, m.lane) == (step, "gather", rank)}
            assert held["gathered parameters"] == largest  # one whole block at once, never a model's worth
    assert largest == whole(units[blocks[0]][1]) > max(whole(m) for m in units[blocks[0]][1].modules() if m is not units[blocks[0]][1])
    assert largest < whole(tutorial.build(config)[0])


def whole(module: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in module.parameters())


def test_a_dataparallel_run_splits_its_token_rows_as_the_split_rules_say():
    config = RunConfig(model="transformer", gpus=3, train=True, batch_size=10, data_size=20, backend="simulated")
    trace = record(config)
    assert trace.failure is None
    trace_json.loads(trace_json.dumps(trace))  # DataParallel's check, torch-free, against its split rules
    for batch in trace.batches:
        assert [s.rows for s in trace.replicas(batch.index)] == replica_rows(config, batch.rows)
        assert [s.input_shape for s in trace.replicas(batch.index)] == [[len(chunk), 6] for chunk in torch.arange(batch.rows).chunk(3)]
