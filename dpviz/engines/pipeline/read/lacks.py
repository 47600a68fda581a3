"""What a loaded pipeline trace lacks for one of its views: a file edited since its run may leave out the facts a
view draws from (a run always records them). One sentence, said in the view's place."""
from __future__ import annotations

from dpviz.analysis.batch_facts import memory_batches
from dpviz.analysis.wording import counted
from dpviz.engines.pipeline.read.bubble import ended
from dpviz.trace import Trace


def pipeline_lacks(trace: Trace, view: str) -> str | None:
    """Memory draws each sampled step's activations from facts "flight": a step that ended with none has nothing."""
    if view != "memory":
        return None
    flight = trace.facts.get("flight") or []
    held = {row[0] for stage in flight for row in stage or []}
    bare = [b for b in memory_batches(trace) if 0 <= b < len(trace.batches) and ended(trace, b) and b not in held]
    if bare:
        return (f"This file records no activations kept pass by pass (facts 'flight') for step {counted(bare[0])}, "
                "so there is no memory of its microbatches in flight to draw.")
    return None
