"""FSDP's words: the phases of one training step on every rank, per sharded module, and its memory.

One process per rank, as DDP, but no rank holds the whole model: fully_shard leaves each rank a shard of every
parameter (rows k/W.. of dim 0). Per step each rank loads its own rows; in forward, each sharded module's
parameters are all-gathered just before it runs and freed (resharded) after; the loss; in backward each module's
parameters are gathered again, its gradients computed and reduce-scattered (each rank keeps the sum of its own
rows of the gradient); then each rank's optimizer steps its own shard. The collectives of a module are drawn on
its own sub-row under the rank (`group` is the sharded module's index), the rank's own work above.

On a mesh (FSDP × TP) each rank also all-reduces inside its tensor-parallel group, as the tp engine's ranks do: a
row-wise Linear's outputs in forward, a column-wise input's gradient in backward; drawn on the sub-row of the
sharded module that holds the cut Linear.
"""
from __future__ import annotations

import dataclasses

from dpviz.trace.vocabulary import EVERY_LANE, MemoryKind, Phase, Vocabulary
from dpviz.engines.ddp.vocabulary import VOCABULARY as DDP
from dpviz.engines.tp.vocabulary import VOCABULARY as TP

_DDP = {phase.name: phase for phase in DDP.phases}
_TP = {phase.name: phase for phase in TP.phases}
_IN_GROUP = " inside the rank's tensor-parallel group (FSDP × TP)"
# The collectives take the legend's colours (dpviz.trace.legend), as every engine's do: the all-gather in backward
# is the forward's green, hatched as backward is; the reduce-scatter a hue of its own.

VOCABULARY = Vocabulary(
    engine="fsdp",
    title="FSDP",
    lane_noun="rank",
    group_noun="sharded module",  # what a gather, a reshard or a reduce-scatter is of
    rows_once=False,
    lead_lane=False,
    phases=(
        Phase("shard", EVERY_LANE, "fully_shard", "fully_shard: each rank keeps its own shard of every parameter "
              "(nothing is sent: every rank built the same model)", color="#885511", place="every rank, once"),
        _DDP["load"],
        Phase("gather", EVERY_LANE, "all-gather (forward)",
              "all-gather before forward: the module's whole parameters gathered from every rank's shard",
              kind="all-gather", place="every rank, per sharded module, before its forward", grouped=True),
        Phase("compute", EVERY_LANE, "module forward", "the sharded module's own forward, on its gathered parameters",
              color="#6054C0", place="every rank, per sharded module", grouped=True),
        Phase("reshard", EVERY_LANE, "reshard", "reshard: the gathered parameters freed, the rank's shard kept",
              color="#6C90C0", place="every rank, per sharded module", grouped=True),
        Phase("forward", EVERY_LANE, "forward", "forward: rows", place="every rank, on its own rows"),
        dataclasses.replace(_TP["allreduce_forward"], hover=_TP["allreduce_forward"].hover + _IN_GROUP,
                            place="every rank on a mesh, per row-wise Linear, in forward"),
        _DDP["loss"],
        _DDP["backward"],
        dataclasses.replace(_TP["allreduce_backward"], hover=_TP["allreduce_backward"].hover + _IN_GROUP,
                            place="every rank on a mesh, per column-wise input, in backward"),
        Phase("gather_backward", EVERY_LANE, "all-gather (backward)",
              "all-gather in backward: the module's parameters gathered again for its gradients",
              kind="all-gather", hatch="x", place="every rank, per sharded module, in backward", training=True,
              grouped=True),
        Phase("reduce_scatter", EVERY_LANE, "reduce-scatter",
              "reduce-scatter: the module's gradients summed over the ranks, each rank keeping its own shard",
              kind="reduce-scatter", place="every rank, per sharded module, in backward", training=True, grouped=True),
        dataclasses.replace(_DDP["step"], hover="optimizer step: each rank updates its own shard of the "
                                                "parameters, with its shard of the optimizer state (SGD or Adam)"),
    ),
    memory_kinds=(
        MemoryKind("parameters", "#7766BB"),
        MemoryKind("gathered parameters", "#EE7733", transient=True, family="communication buffers"),
        MemoryKind("gradients", "#AA4444"),
        MemoryKind("optimizer state", "#CC9999"),
        MemoryKind("output and loss", "#007788", transient=True, family="activations"),
        MemoryKind("rows loaded", "#996611", transient=True, family="activations"),
        MemoryKind("activations", "#33EEEE", transient=True),
    ),
    words={
        **DDP.words,
        "computed_memory": "computed from the tensors each rank holds (its shards) in its own process",
        "thin_row": "thin row under each {noun}: each sharded module's collectives and forward",
        # The timeline opens on one step's work, where each module's collectives are wide enough to read.
        "timeline_zoom": "opened on step {step} (double-click: every step)",
        # Said beside the reduce-scatters a CPU run drew: what gloo ran in their place.
        "gloo_reduce_scatter": "on gloo (this CPU run) each reduce-scatter runs as an all-reduce",
        # Said when backward gathered nothing: reshard_after_forward=False kept every module whole since its forward.
        "no_backward_gather": "no all-gather in backward: each module kept whole since its forward",
    },
)
