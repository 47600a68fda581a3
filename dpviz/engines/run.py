"""Recording through the configured engine: the entry points the page, the command line and the library use.

    trace = record(RunConfig(gpus=8))      # the engine named by config.engine
    config = resolve(RunConfig(gpus=8))    # the device kind settled once: "cuda" or "simulated"
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from dpviz.config import ConfigError, RunConfig
from dpviz.trace import Trace
from dpviz.engines import engine
from dpviz.engines.base import Progress
from dpviz.engines.processes import know_cuda_devices, known_cuda_devices


def record(config: Any, second: Any = None, *, progress: Progress | None = None, workload: Any = None,
           loss: Any = None, **settings: Any) -> Trace:
    """Run `config` on its engine and return what happened, batch by batch: `record(config, progress)`. The
    trace keeps `config` as given ("auto" stays "auto") and says which kind of device ran it.

    Or a module of your own on one batch: `record(model, batch, engine="ddp", gpus=2, train=True, loss=fn)`
    (any RunConfig setting by name; the batch size is the batch's rows unless given, the data one batch unless
    given). A DataParallel run trains `model` itself; a run of processes loads rank 0's trained parameters and buffers
    back into it."""
    if not isinstance(config, RunConfig):  # a module of the user's own, and its batch
        from dpviz.catalogue import OWN
        from dpviz.engines.workload.own import from_objects

        # Its settings checked as a module of one's own (an engine's rules on its layers and batch come once built).
        built = from_objects(config, second, RunConfig(**{**settings, "model": OWN, "inputs": OWN}), loss,
                             batch_size_given="batch_size" in settings, data_size_given="data_size" in settings)
        return engine(built.config.engine).record(built.config, progress, built)
    if settings or loss is not None:
        raise TypeError("record(config, progress) takes a RunConfig; record(model, batch, **settings) runs a module "
                        "of your own.")
    progress = second if second is not None else progress
    if workload is not None:
        return engine(workload.config.engine).record(workload.config, progress, workload)
    return engine(config.engine).record(config, progress)


def resolve(config: RunConfig, available: int | None = None) -> RunConfig:
    """`config` with its device kind settled by its engine; ConfigError when it cannot run here."""
    return engine(config.engine).resolve(config, available)


def cuda_device_count() -> int:
    """CUDA devices this machine has (0 without CUDA). A process without torch (a hosted page's server) does
    not import it to ask: with no GPU driver loaded the answer is 0, and otherwise a process of its own asks."""
    known = known_cuda_devices()
    if known is None:
        if "torch" not in sys.modules and not _gpu_driver():
            known = 0
        elif "torch" not in sys.modules:
            from dpviz.engines.apart import call_apart

            known = call_apart(_torch_cuda_devices)
        else:
            known = _torch_cuda_devices()
        know_cuda_devices(known)
    return known


def _torch_cuda_devices() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _gpu_driver() -> bool:
    """Whether a GPU driver torch could use is loaded: NVIDIA's (CUDA) or AMD's (ROCm, which torch calls cuda)."""
    nvidia = Path("/proc/driver/nvidia/gpus")
    return (nvidia.is_dir() and any(nvidia.iterdir())) or Path("/dev/kfd").exists()


def runnable(config: RunConfig, available: int | None = None) -> tuple[RunConfig, str | None]:
    """`config`, or the simulated equivalent with a sentence saying why, when its backend can't run here."""
    try:
        resolve(config, available)
    except ConfigError as error:
        fallback = RunConfig(**{**config.to_dict(), "backend": "simulated"})
        return fallback, f"{str(error)[:-1].split(';')[0]}, so simulated devices are shown instead."
    return config, None
