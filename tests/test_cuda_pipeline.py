"""A pipeline's stages on real GPUs (NCCL's point-to-point sends), against the same run with gloo on the CPU.

One process per stage, each on its own GPU; skipped without CUDA (CI has none).
"""
import pytest
import torch

from dpviz.config import RunConfig
from dpviz.engines import engine
from dpviz.engines.ranks.launch import launch

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = pytest.mark.cuda


@pytest.mark.parametrize("stages, model, schedule", [(2, "mlp", "gpipe"), (4, "transformer", "1f1b")])
def test_nccl_and_gloo_stages_train_the_same_parameters(stages, model, schedule):
    if GPUS < stages:
        pytest.skip(f"needs {stages} CUDA devices, this machine has {GPUS}")
    settings = dict(engine="pipeline", gpus=stages, train=True, model=model, schedule=schedule, microbatches=4,
                    batch_size=32, data_size=96)
    nccl = launch(RunConfig(backend="cuda", **settings), cuda=True, keep_parameters=True)
    gloo = launch(RunConfig(backend="cpu", **settings), keep_parameters=True)
    assert nccl["exit_codes"] == gloo["exit_codes"] == [0] * stages
    assert [r["facts"]["sent"] for r in nccl["ranks"]] == [r["facts"]["sent"] for r in gloo["ranks"]]
    for real, cpu in zip(nccl["ranks"], gloo["ranks"]):
        assert real["parameters"].keys() == cpu["parameters"].keys()
        for name, value in real["parameters"].items():
            assert torch.allclose(torch.from_numpy(value), torch.from_numpy(cpu["parameters"][name]), atol=1e-4), name


def test_a_cuda_pipeline_trace_measures_memory_and_names_each_stage_s_gpu():
    if GPUS < 2:
        pytest.skip(f"needs 2 CUDA devices, this machine has {GPUS}")
    trace = engine("pipeline").record(RunConfig(engine="pipeline", gpus=2, train=True, model="mlp", backend="cuda",
                                                batch_size=32, data_size=96))
    assert trace.failure is None and trace.backend == "cuda" and trace.memory_kind == "measured"
    assert [lane.name for lane in trace.lanes] == ["stage 1 (rank 0, process on cuda:0)",
                                                   "stage 2 (rank 1, process on cuda:1)"]
