"""The ZeRO-1 engine: DDP's real processes and rank code, each rank stepping ZeroRedundancyOptimizer."""
from __future__ import annotations

from dpviz.trace import Trace
from dpviz.engines.ddp.engine import DistributedEngine
from dpviz.engines.zero1.vocabulary import VOCABULARY


class ShardedEngine(DistributedEngine):
    """ZeroRedundancyOptimizer over DistributedDataParallel on `gpus` ranks: NCCL on GPUs, or gloo on the CPU.
    It records as DDP does (the rank code builds the engine's optimizer through its spec's `optimizer` part)."""

    name = "zero1"
    vocabulary = VOCABULARY

    def check(self, trace: Trace) -> None:
        from dpviz.engines.zero1.check import check_trace

        check_trace(trace)


ENGINE = ShardedEngine()
