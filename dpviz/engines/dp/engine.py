"""The DataParallel engine: the real nn.DataParallel on CUDA devices, SimulatedDataParallel elsewhere."""
from __future__ import annotations

import dataclasses
from typing import Any

from dpviz.config import RunConfig
from dpviz.trace import Trace
from dpviz.engines.base import Progress
from dpviz.engines.dp.devices import resolve_backend
from dpviz.engines.dp.vocabulary import VOCABULARY


class DataParallelEngine:
    """nn.DataParallel over `gpus` devices: one process, a thread per replica."""

    name = "dp"
    vocabulary = VOCABULARY

    def resolve(self, config: RunConfig, available: int | None = None) -> RunConfig:
        return dataclasses.replace(config, backend=resolve_backend(config, available))

    def record(self, config: RunConfig, progress: Progress | None = None, workload: Any = None) -> Trace:
        from dpviz.engines.dp.recorder import record  # torch, only when a run is asked for

        return record(config, progress, workload)

    def check(self, trace: Trace) -> None:
        from dpviz.engines.dp.check import check_trace

        check_trace(trace)


ENGINE = DataParallelEngine()
