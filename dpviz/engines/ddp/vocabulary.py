"""DistributedDataParallel's vocabulary: the phases of one training step on every rank, and its memory.

One process per rank, each with its own copy of the model: DDP() checks that every rank has the same
parameters and broadcasts rank 0's; every step each rank loads its own rows (DistributedSampler), runs
forward on them (after DDP broadcasts rank 0's buffers, for a model that has any), computes its own
loss, and in backward all-reduces the gradients bucket by bucket while the rest of backward still runs;
then every rank steps its own optimiser on the same averaged gradients. No scatter, no replicate, no
gather. Every phase runs on every rank: a lane is a rank (a process), never a GPU.
"""
from __future__ import annotations

from dpviz.trace.vocabulary import EVERY_LANE, MemoryKind, Phase, Vocabulary

# Communication between ranks gets colours of its own (as DataParallel's host copies do; the model's copy
# takes replicate's brown), none a device's and 3:1 on the light and the dark page, so that what moves
# between processes reads apart from each rank's compute in its own colour.
# What an all-reduce is of: one of the reducer's gradient buckets, by torch's own index (facts["ddp"]["buckets"]).
BUCKET = "bucket"

VOCABULARY = Vocabulary(
    engine="ddp",
    title="DistributedDataParallel",
    lane_noun="rank",
    group_noun=BUCKET,
    rows_once=False,
    lead_lane=False,
    phases=(
        Phase("broadcast", EVERY_LANE, "DDP() broadcast", "DDP(): rank 0's parameters and buffers broadcast to every rank",
              kind="broadcast", place="every rank, once"),
        Phase("load", EVERY_LANE, "load", "load: the rank's DataLoader reads its rows", hatch="/", place="every rank"),
        Phase("rebuild", EVERY_LANE, "rebuild buckets", "rebuild: buckets re-formed in gradient-ready order (once)",
              color="#556655", place="every rank, once", training=True),
        Phase("buffers", EVERY_LANE, "buffers broadcast", "buffers: rank 0's buffers broadcast before forward",
              kind="broadcast", hatch=".", place="every rank"),
        Phase("forward", EVERY_LANE, "forward", "forward: rows", place="every rank, on its own rows"),
        Phase("loss", EVERY_LANE, "loss", "loss on the rank's own output", hatch=".", place="every rank", training=True),
        Phase("backward", EVERY_LANE, "backward (×)", "backward: gradient of the rank's rows", hatch="x",
              place="every rank", training=True),
        Phase("allreduce", EVERY_LANE, "all-reduce", "all-reduce: a bucket's gradients averaged over the ranks",
              kind="all-reduce", place="every rank, overlapping backward", training=True, grouped=True),
        Phase("step", EVERY_LANE, "optimizer step", "optimizer step: updates the rank's own parameters (SGD or Adam, as chosen)", hatch="-",
              place="every rank", training=True),
        Phase("join", EVERY_LANE, "join (shadowing)", "join: out of rows, this rank answers the others' all-reduces with zeros",
              color="#BB5599", place="ranks that ran out of rows", training=True),
    ),
    # Bottom to top of a stacked bar; every rank holds the same kinds (no device 0 that holds more). The
    # colours DataParallel's kinds have, none a device's (tests/test_figures_colors.py).
    memory_kinds=(
        MemoryKind("parameters", "#7766BB"),
        MemoryKind("gradients", "#AA4444"),
        MemoryKind("gradient buckets", "#FF9966", family="communication buffers"),
        MemoryKind("optimizer state", "#CC9999"),
        MemoryKind("output and loss", "#007788", transient=True, family="activations"),
        MemoryKind("rows loaded", "#996611", transient=True, family="activations"),
        MemoryKind("activations", "#33EEEE", transient=True),
    ),
    words={
        "gathered": "no gather: each rank keeps its own output",
        "not_gathered": "one rank, nothing to all-reduce",
        "carries_most": "{lane} holds the most",
        "own_error": "The rank's own error",
        "computed_memory": "computed from tensor sizes in each rank's process",
    },
)
