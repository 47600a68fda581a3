"""The pipeline engine: DDP's real processes and launcher, each rank a stage running torch's PipelineStage under
torch's schedule (rank.py)."""
from __future__ import annotations

from dpviz.engines.ddp.engine import DistributedEngine
from dpviz.engines.pipeline.vocabulary import VOCABULARY
from dpviz.trace import Trace


class PipelineEngine(DistributedEngine):
    """Stages on `gpus` processes: NCCL on GPUs, or gloo on the CPU. It records as DDP does (its ranks run the
    spec's `rank_program`, and its own merge makes the trace)."""

    name = "pipeline"
    vocabulary = VOCABULARY

    def check(self, trace: Trace) -> None:
        from dpviz.engines.pipeline.check import check_trace

        check_trace(trace)


ENGINE = PipelineEngine()
