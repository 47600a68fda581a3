"""The real DistributedDataParallel with NCCL on real GPUs, against the same run with gloo on the CPU.

One process per GPU; skipped without CUDA (CI has none).
"""
import pytest
import torch

from dpviz.config import RunConfig
from dpviz.engines import engine
from dpviz.engines.ranks.launch import launch

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = pytest.mark.cuda


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_nccl_and_gloo_load_the_same_rows_and_train_the_same_parameters(ranks):
    if GPUS < ranks:
        pytest.skip(f"needs {ranks} CUDA devices, this machine has {GPUS}")
    settings = dict(engine="ddp", gpus=ranks, train=True, model="mlp", bucket_cap_mb=0.0002, batch_size=32)
    nccl = launch(RunConfig(backend="cuda", **settings), cuda=True, keep_parameters=True)
    gloo = launch(RunConfig(backend="cpu", **settings), keep_parameters=True)
    assert nccl["exit_codes"] == gloo["exit_codes"] == [0] * ranks
    for real, cpu in zip(nccl["ranks"], gloo["ranks"]):
        assert [s["ids"] for s in real["steps"]] == [s["ids"] for s in cpu["steps"]]
        assert real["layouts"] == cpu["layouts"] and real["reducer"] == cpu["reducer"]
        for name, value in real["parameters"].items():
            assert torch.allclose(torch.from_numpy(value), torch.from_numpy(cpu["parameters"][name]), atol=1e-5)


def test_a_cuda_trace_measures_memory_and_names_each_rank_s_gpu():
    if GPUS < 2:
        pytest.skip(f"needs 2 CUDA devices, this machine has {GPUS}")
    trace = engine("ddp").record(RunConfig(engine="ddp", gpus=2, train=True, backend="cuda"))
    assert trace.backend == "cuda" and trace.memory_kind == "measured"
    assert {m.category for m in trace.memory} == {"allocated"} and {m.lane for m in trace.memory} == {0, 1}
    assert [lane.name for lane in trace.lanes] == ["rank 0 (process on cuda:0)", "rank 1 (process on cuda:1)"]
    assert {s.thread for s in trace.spans if s.phase == "allreduce"} == {"NCCL"}
