"""The DataParallel engine: the real nn.DataParallel on CUDA devices, SimulatedDataParallel elsewhere."""
from __future__ import annotations

import dataclasses

from ...config import ConfigError, RunConfig
from ...trace import Trace
from ..base import Progress
from .vocabulary import VOCABULARY


def resolve_backend(config: RunConfig, available: int | None = None) -> str:
    """The kind of device a run of `config` uses: real GPUs when asked for, or when `auto` finds enough."""
    if available is None:
        from ..run import cuda_device_count

        available = cuda_device_count()
    if config.backend == "cuda":
        if available < config.gpus:
            raise ConfigError(
                f"backend cuda needs {config.gpus} CUDA device{'s' if config.gpus > 1 else ''} "
                f"but this machine has {available}; use backend simulated or fewer gpus."
            )
        return "cuda"
    if config.backend == "auto" and available >= config.gpus >= 2:
        return "cuda"
    return "simulated"


class DataParallelEngine:
    """nn.DataParallel over `gpus` devices: one process, a thread per replica."""

    name = "dp"
    vocabulary = VOCABULARY

    def resolve(self, config: RunConfig, available: int | None = None) -> RunConfig:
        return dataclasses.replace(config, backend=resolve_backend(config, available))

    def record(self, config: RunConfig, progress: Progress | None = None) -> Trace:
        from .recorder import record  # torch, only when a run is asked for

        return record(config, progress)

    def check(self, trace: Trace) -> None:
        from .check import check_split

        check_split(trace)


ENGINE = DataParallelEngine()
