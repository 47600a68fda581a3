"""The FSDP engine: DDP's real processes and rank code, each rank's model sharded with fully_shard (FSDP2)."""
from __future__ import annotations

from dpviz.trace import Trace
from dpviz.engines.ddp.engine import DistributedEngine
from dpviz.engines.fsdp.vocabulary import VOCABULARY


class ShardedDataEngine(DistributedEngine):
    """fully_shard on `gpus` ranks: NCCL on GPUs, or gloo on the CPU. It records as DDP does (the rank code wraps
    the model through its spec's `wrap` part)."""

    name = "fsdp"
    vocabulary = VOCABULARY

    def check(self, trace: Trace) -> None:
        from dpviz.engines.fsdp.check import check_trace

        check_trace(trace)


ENGINE = ShardedDataEngine()
