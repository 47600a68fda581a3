"""The paragraphs of "What happened and why" that an FSDP × TP run says in place of plain FSDP's: the ranks on their
mesh, the rows each tp group loads, what a rank holds of the split and of the whole parameters, and the collectives
of each group with their bytes, every figure from the trace (mesh_text.py). No torch.

    explain_mesh(trace)     # [ranks, rows, holdings, collectives]: markdown paragraphs
"""
from __future__ import annotations

from dpviz.analysis.wording import human_bytes, plural
from dpviz.engines.fsdp.mesh import DP_SHARD, TP
from dpviz.engines.fsdp.read import mesh_text as mesh
from dpviz.engines.tp.read.text import LESSON
from dpviz.trace import Trace
from dpviz.figures.trace_words import time_sharing, where_ranks_ran


def ranks_paragraph(trace: Trace) -> str:
    dp, tp = mesh.mesh_degrees(trace)
    k = len(trace.lanes)
    where = where_ranks_ran(trace)
    text = (f"**Processes on a {dp} × {tp} mesh.** FSDP over tensor parallelism ran {plural(k, 'rank')}: "
            f"{plural(k, 'Python process')} {where}, laid out by init_device_mesh as {dp} {DP_SHARD} × {tp} {TP} "
            f"(rank i · {tp} + j is {DP_SHARD} i, {TP} j). Tensor parallelism cuts every layer inside each {TP} group, "
            f"then FSDP shards those slices again across each {DP_SHARD} group: {mesh.groups_words(trace)}. No rank "
            "holds the whole model, and none gathers it: an all-gather brings back only the rank's tensor-parallel "
            "slice.")
    return text + time_sharing(trace)


def rows_paragraph(trace: Trace) -> str | None:
    if not trace.batches:
        return None
    dp, tp = mesh.mesh_degrees(trace)
    first = trace.batches[0].index
    groups = mesh.loaded(trace, first)
    said = "; ".join(f"{TP} group {mesh.ranks_words(group)}: rows {', '.join(map(str, rows[:6]))}"
                     + (", …" if len(rows) > 6 else "") for group, rows in list(groups.items())[:3])
    most, again = mesh.data_counts(trace)
    text = (f"**Rows per {TP} group.** The {tp} ranks of a {TP} group load the same rows: they cut the layers between "
            f"them, not the batch. DistributedSampler deals the rows over the {dp} {DP_SHARD} groups, so "
            f"batch_size {trace.config.batch_size:,} is {plural(-(-trace.config.batch_size // dp), 'row')} a rank "
            f"and a step loads up to {most:,} different rows. In step 1 {said}.")
    if again:
        text += (f" {plural(again, 'row')} {'was' if again == 1 else 'were'} loaded again within an epoch, "
                 "DistributedSampler's padding where the rows do not divide over the groups.")
    return text


def holdings_paragraph(trace: Trace) -> str | None:
    held = trace.facts.get("held")
    if not held or None in held:
        return None
    dp, tp = mesh.mesh_degrees(trace)
    mine = mesh.holdings(trace)
    first = held[0]
    text = (f"**What each rank holds on the mesh.** Of each of the {plural(len(mine.split.names), 'parameter')} "
            f"tensor parallelism splits, a rank holds 1/{dp * tp}: 1/{tp} by tensor parallelism (its slice, as in a "
            f"{tp}-rank tensor-parallel run), then 1/{dp} of that slice by FSDP (dim 0), placed "
            f"{' or '.join(mine.split.placements)}; rank 0 holds {mine.split.held:,} of their {mine.split.whole:,} "
            f"elements.")
    if mine.whole.names:
        text += (f" Of the {plural(len(mine.whole.names), 'parameter')} it leaves whole (norms, embeddings, row-wise "
                 f"biases), 1/{dp}: FSDP shards them over the {DP_SHARD} group only, and the {tp} ranks of a {TP} group "
                 f"hold the same shard; rank 0 holds {mine.whole.held:,} of their {mine.whole.whole:,} elements.")
    kind = trace.config.optimizer
    state = ("Adam's two moments" if kind == "adam" else "SGD's momentum" if kind == "sgd" else "the optimizer's state")
    text += (f" In all {first['parameters']['elements']:,} of the model's {mesh.model_elements(trace):,} parameter "
             f"elements on rank 0 ({human_bytes(first['parameters']['bytes'])}), with gradients of as many and "
             f"{first['optimizer state']['elements']:,} of optimizer state ({human_bytes(first['optimizer state']['bytes'])}: "
             f"{state} of its shards). FSDP alone on {plural(len(trace.lanes), 'rank')} would hold 1/{len(trace.lanes)} "
             f"of every parameter; tensor parallelism alone 1/{tp} of the split ones and the rest whole.")
    return text


def collectives_paragraph(trace: Trace) -> str | None:
    ran = mesh.collectives(trace)
    if not ran:
        return None
    dp, tp = mesh.mesh_degrees(trace)
    text = (f"**Collectives, per group.** Per step rank 0 ran {mesh.collectives_words(trace)}. FSDP's all-gathers and "
            f"reduce-scatters run across the {DP_SHARD} group, {plural(dp, 'rank')}, each module gathered just before "
            "it runs and freed after (its gradients reduce-scattered, the mean over the groups' rows), and carry only "
            f"the rank's tensor-parallel slices. Tensor parallelism's all-reduces run inside the {TP} group, "
            f"{plural(tp, 'rank')}, the size of the activations, not of the parameters.")
    if trace.config.train and trace.backend == "cpu":
        text += (" gloo has no reduce-scatter: on this CPU run FSDP all-reduces the gradients and each rank keeps "
                 "its shard, so more bytes moved than on GPUs with NCCL.")
    return text + f" {LESSON}."


def explain_mesh(trace: Trace) -> list[str | None]:
    """The mesh run's own paragraphs, in the order plain FSDP's stand."""
    return [ranks_paragraph(trace), rows_paragraph(trace), holdings_paragraph(trace), collectives_paragraph(trace)]
