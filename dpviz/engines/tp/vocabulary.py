"""Tensor parallelism's words: the phases of one training step on every rank, and its memory.

Every rank loads the same rows (the whole batch) and holds a slice of every cut layer: a column-wise Linear's
output features 1/W, a row-wise Linear's input features 1/W, the rest whole. In forward, each row-wise Linear's
partial outputs are all-reduced (Megatron's g); in backward, the input gradient of each column-wise Linear (or of a
module whose column-wise Linears share one input) is all-reduced (Megatron's f). Each collective is drawn on its
own sub-row under the rank (`group` is the module's index in facts["cut_modules"]).
"""
from __future__ import annotations

import dataclasses

from dpviz.trace.vocabulary import EVERY_LANE, MemoryKind, Phase, Vocabulary
from dpviz.engines.ddp.vocabulary import VOCABULARY as DDP

_DDP = {phase.name: phase for phase in DDP.phases}

VOCABULARY = Vocabulary(
    engine="tp",
    title="Tensor parallel",
    lane_noun="rank",
    group_noun="cut module",  # what an all-reduce is of
    rows_once=True,
    lead_lane=False,
    phases=(
        Phase("parallelize", EVERY_LANE, "parallelize_module",
              "parallelize_module: each rank keeps its slice of every cut Linear (nothing is sent: every rank built "
              "the same model)", color="#885511", place="every rank, once"),
        dataclasses.replace(_DDP["load"], hover="load: every rank reads the same rows, the whole batch"),
        Phase("forward", EVERY_LANE, "forward", "forward: every rank runs every layer on its own slices",
              place="every rank, on the whole batch"),
        Phase("allreduce_forward", EVERY_LANE, "all-reduce (forward)",
              "all-reduce in forward (Megatron's g): a row-wise Linear's partial outputs summed over the ranks; the "
              "next layer waits for it", kind="all-reduce", place="every rank, per row-wise Linear, in forward",
              grouped=True),
        _DDP["loss"],
        _DDP["backward"],
        Phase("allreduce_backward", EVERY_LANE, "all-reduce (backward)",
              "all-reduce in backward (Megatron's f): the gradient of a column-wise Linear's input summed over the "
              "ranks; the layer before waits for it", kind="all-reduce", hatch="x",
              place="every rank, per column-wise input, in backward", training=True, grouped=True),
        dataclasses.replace(_DDP["step"], hover="optimizer step: each rank updates its own slices and the whole "
                                                "parts, with the optimizer state of those (SGD or Adam); nothing moves"),
    ),
    memory_kinds=(
        MemoryKind("parameters", "#7766BB"),
        MemoryKind("gradients", "#AA4444"),
        MemoryKind("optimizer state", "#CC9999"),
        MemoryKind("output and loss", "#007788", transient=True, family="activations"),
        MemoryKind("rows loaded", "#996611", transient=True, family="activations"),
        MemoryKind("activations", "#33EEEE", transient=True),
    ),
    words={
        **DDP.words,
        "computed_memory": "computed from the tensors each rank holds (its slices, the whole parts) in its own process",
        "thin_row": "thin row under each {noun}: each cut module's all-reduces",
        "timeline_zoom": "opened on step {step} (double-click: every step)",
    },
)
