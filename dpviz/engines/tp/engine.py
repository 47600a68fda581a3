"""The tensor-parallel engine: DDP's real processes and launcher, each rank's model cut with parallelize_module."""
from __future__ import annotations

from dpviz.trace import Trace
from dpviz.engines.ddp.engine import DistributedEngine
from dpviz.engines.tp.vocabulary import VOCABULARY


class TensorParallelEngine(DistributedEngine):
    """torch.distributed.tensor.parallel on `gpus` ranks: NCCL on GPUs, or gloo on the CPU. It records as DDP does
    (the rank code cuts the model through its program's `wrap`)."""

    name = "tp"
    vocabulary = VOCABULARY

    def check(self, trace: Trace) -> None:
        from dpviz.engines.tp.check import check_trace

        check_trace(trace)


ENGINE = TensorParallelEngine()
