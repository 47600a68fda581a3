"""DataParallel's vocabulary: the phases of one nn.DataParallel call and the memory each device holds.

One process: the calling thread scatters the batch, replicates the model and gathers the outputs
(host phases); each device runs its replica's forward (and, training, its backward); the loss is
computed on the output device, and the gradients summed and stepped on device_ids[0].
"""
from __future__ import annotations

from dpviz.trace.vocabulary import EVERY_LANE, HOST, ONE_LANE, MemoryKind, Phase, Vocabulary

SUM_LABEL = "sum of gradients"  # the "reduce" phase: DataParallel sums the replicas' gradients onto device 0

VOCABULARY = Vocabulary(
    engine="dp",
    title="DataParallel",
    lane_noun="GPU",
    phases=(
        # Host phases have colours of their own, none a device's (tests/test_figures_colors.py): 3.5:1 on the
        # light and the dark page, apart from one another and from every device colour under colour blindness.
        Phase("scatter", HOST, "scatter", "scatter: chunk copied to this device", kind="scatter"),
        Phase("replicate", HOST, "replicate", "replicate: model copied to this device", kind="broadcast"),
        Phase("apply", HOST, "apply", "parallel_apply: one thread per replica", color="#546C54", drawn=False),
        Phase("forward", EVERY_LANE, "forward", "forward: rows", place="all replicas, overlapping"),
        Phase("gather", HOST, "gather", "gather: output copied back to the output device", kind="gather"),
        Phase("loss", ONE_LANE, "loss", "loss on the output device", hatch=".", place="output device", training=True),
        Phase("backward", EVERY_LANE, "backward (×)", "backward: gradient of rows", hatch="x", place="all replicas",
              training=True),
        # One name in every view: the legend, the flow's nodes, the memory view's phases, the key figures.
        Phase("reduce", ONE_LANE, SUM_LABEL, f"{SUM_LABEL}: every replica's gradients added into .grad (a sum, not a mean)",
              hatch="+", place="device_ids[0]", training=True, kind="reduce"),
        Phase("step", ONE_LANE, "optimizer step", "optimizer step: updates the parameters (SGD or Adam, as chosen)", hatch="-", place="device_ids[0]",
              training=True),
    ),
    # Bottom to top of a stacked bar: what only device 0 holds first, then data, then what every replica
    # holds. No colour a device has, nor one that reads as a device's: each at least 25 apart (CIE76) from
    # every device colour, apart from one another under colour blindness and 3:1 on the dark page
    # (tests/test_figures_colors.py).
    memory_kinds=(
        MemoryKind("parameters", "#7766BB"),
        MemoryKind("gradients", "#AA4444"),
        MemoryKind("optimizer state", "#CC9999"),
        MemoryKind("output and loss", "#007788", transient=True, family="activations"),
        MemoryKind("batch and chunks", "#996611", transient=True, more="batch and chunks (the whole batch, not one chunk)",
                   family="activations"),
        MemoryKind("parameter copies", "#AAAAFF", transient=True, family="parameters"),  # a replica's own
        MemoryKind("activations", "#33EEEE", transient=True),
        MemoryKind("backward buffers", "#FFDDBB", transient=True, more="backward buffers (the whole output gradient)",
                   family="activations"),
    ),
    words={
        "gathered": "gathered on {lane}",
        "not_gathered": "one device, no gather",
        "carries_most": "{lane} carries the most",
        "own_error": "The replica's own error",
    },
)
