"""DataParallel's vocabulary: the phases of one nn.DataParallel call and the memory each device holds.

One process: the calling thread scatters the batch, replicates the model and gathers the outputs
(host phases); each device runs its replica's forward (and, training, its backward); the loss is
computed on the output device, and the gradients summed and stepped on device_ids[0].
"""
from __future__ import annotations

from ...vocabulary import EVERY_LANE, HOST, ONE_LANE, MemoryKind, Phase, Vocabulary

VOCABULARY = Vocabulary(
    engine="dp",
    title="DataParallel",
    lane_noun="GPU",
    phases=(
        # Host phases are dark neutrals, distinct from every device colour and from idle grey.
        Phase("scatter", HOST, "scatter", "scatter: chunk copied to this device", color="#5A5A5A"),
        Phase("replicate", HOST, "replicate", "replicate: model copied to this device", color="#8C6D46"),
        Phase("apply", HOST, "apply", "parallel_apply: one thread per replica", color="#5A5A5A", drawn=False),
        Phase("forward", EVERY_LANE, "forward", "forward: rows", place="all replicas, overlapping"),
        Phase("gather", HOST, "gather", "gather: output copied back to the output device", color="#2F4F4F"),
        Phase("loss", ONE_LANE, "loss", "loss on the output device", hatch=".", place="output device", training=True),
        Phase("backward", EVERY_LANE, "backward (×)", "backward: gradient of rows", hatch="x", place="all replicas",
              training=True),
        Phase("reduce", ONE_LANE, "sum of grads", "sum: replicas' gradients added into .grad", hatch="+",
              place="device_ids[0]", training=True),
        Phase("step", ONE_LANE, "SGD step", "step: SGD updates the parameters", hatch="-", place="device_ids[0]",
              training=True),
    ),
    # Bottom to top of a stacked bar: what only device 0 holds first, then data, then what every replica
    # holds. Colours from Paul Tol's palettes, none a device colour, kept apart under colour blindness
    # (tests/test_figures_colors.py); dark for what only device 0 holds.
    memory_kinds=(
        MemoryKind("parameters", "#222255"),
        MemoryKind("gradients", "#CC3311"),
        MemoryKind("optimizer state", "#AA4499"),
        MemoryKind("output and loss", "#555555", transient=True),
        MemoryKind("batch and chunks", "#DDAA33", transient=True, more="batch and chunks (the whole batch, not one chunk)"),
        MemoryKind("parameter copies", "#BBCCEE", transient=True),
        MemoryKind("activations", "#44BB99", transient=True),
        MemoryKind("backward buffers", "#EEDD88", transient=True, more="backward buffers (the whole output gradient)"),
    ),
    words={
        "gathered": "gathered on {lane}",
        "not_gathered": "one device, no gather",
        "carries_most": "{lane} carries the most",
    },
)
