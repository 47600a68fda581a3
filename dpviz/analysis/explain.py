"""Plain-language explanation of a run, derived from its trace: every number comes from what happened.

    from dpviz.analysis.explain import explain
    for paragraph in explain(trace): print(paragraph)   # short markdown paragraphs

It answers the questions users bring to DataParallel (dataparallel-facts.md section 13): why a batch
splits 4, 4, 2, why some GPUs sit idle, why GPU 0 carries more (and, from the memory samples, how
much more), how gradients come back in a training run, where the time went, and whether the GPUs
were real.
"""
from __future__ import annotations


from dpviz.trace import Trace


def explain(trace: Trace) -> list[str]:
    """Short markdown paragraphs explaining what this run did and why, with its own numbers, in its engine's
    words (DDP's ranks, strided shards, buckets and all-reduce are not DataParallel's)."""
    return trace.spec.part("explain")(trace)


