"""The DataParallel engine: the real nn.DataParallel on CUDA devices, SimulatedDataParallel elsewhere."""
from __future__ import annotations

import dataclasses

from ...config import RunConfig
from ...trace import Trace
from ..base import Progress
from .devices import resolve_backend
from .vocabulary import VOCABULARY


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
        from .check import check_trace

        check_trace(trace)


ENGINE = DataParallelEngine()
