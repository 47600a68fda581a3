"""The rules of a ZeRO-1 trace: DDP's (every rank loads its sampler's rows), and, once it has trained, the
parameters' owners as ZeroRedundancyOptimizer partitions them. Plain Python: loading a trace needs no torch.

    check_trace(trace)      # TraceError (one sentence) unless the trace is what a ZeRO-1 run records
"""
from __future__ import annotations

from dpviz.trace import Trace
from dpviz.trace.values import TraceError
from dpviz.engines.ddp.check import check_trace as check_ddp


def check_trace(trace: Trace) -> None:
    """Raise TraceError unless `trace` is what ZeroRedundancyOptimizer over DDP could have recorded."""
    check_ddp(trace)
