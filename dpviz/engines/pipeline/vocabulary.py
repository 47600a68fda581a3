"""A pipeline's words: the phases of one training step on every stage, and its memory.

One process per stage, each holding its own layers of the model. Every step the first stage loads the batch's
rows and the last the rows its targets are made of (as a pipeline's last stage reads the labels); the batch is
cut into microbatches, and torch's schedule runs each microbatch's forward through the stages one after another,
every stage sending its activations to the next, and its backward in reverse, each stage sending the gradients of
its input back; the last stage computes each microbatch's loss. Then each stage's optimizer steps its own layers.
A stage waits while the microbatches it needs are still elsewhere: the bubble.
"""
from __future__ import annotations

from dpviz.trace.vocabulary import EVERY_LANE, ONE_LANE, MemoryKind, Phase, Vocabulary

# Every microbatch's forward and backward is drawn in its microbatch's colour by the schedule view; here, as every
# engine's phases, in the lane's. Transfers between stages get colours of their own, none a device's.
VOCABULARY = Vocabulary(
    engine="pipeline",
    title="Pipeline",
    lane_noun="stage",
    first_lane=1,  # stage 1 first, as the textbooks draw them (torch's stage_index 0: the lane's name says its rank)
    rows_once=False,
    lead_lane=False,
    phases=(
        Phase("stage", EVERY_LANE, "PipelineStage()", "PipelineStage(): the stage's layers wrapped (nothing is sent)",
              color="#8E6A2A", place="every stage, once"),
        Phase("load", ONE_LANE, "load", "load: the first stage's DataLoader reads the batch's rows", hatch="/",
              place="the first stage"),
        Phase("labels", ONE_LANE, "targets", "targets: the last stage reads the batch's rows and makes their targets, as "
              "a pipeline's last stage reads the labels", hatch="/", color="#B46C60", place="the last stage",
              training=True),
        Phase("receive_activations", EVERY_LANE, "receive activations",
              "receive: the microbatch's activations from the stage before, waited for", kind="send/receive",
              hatch=".",
              place="every stage but the first", per_microbatch=True),
        Phase("forward", EVERY_LANE, "forward", "forward: one microbatch through the stage's layers",
              place="every stage, per microbatch", per_microbatch=True),
        Phase("send_activations", EVERY_LANE, "send activations", "send: the microbatch's activations to the next stage",
              kind="send/receive", place="every stage but the last", per_microbatch=True),
        Phase("loss", ONE_LANE, "loss", "loss: the microbatch's loss on the last stage", hatch=".", place="the last stage",
              training=True, per_microbatch=True),
        Phase("receive_gradients", EVERY_LANE, "receive gradients",
              "receive: the gradient of the microbatch's output from the next stage, waited for", kind="send/receive",
              hatch="+",
              place="every stage but the last", training=True, per_microbatch=True),
        Phase("backward", EVERY_LANE, "backward (×)", "backward: one microbatch's gradients through the stage's layers",
              hatch="x", place="every stage, per microbatch", training=True, per_microbatch=True),
        Phase("send_gradients", EVERY_LANE, "send gradients",
              "send: the gradient of the microbatch's input to the stage before", kind="send/receive",
              hatch="x",
              place="every stage but the first", training=True, per_microbatch=True),
        Phase("step", EVERY_LANE, "optimizer step", "optimizer step: the stage updates its own layers (SGD or Adam)",
              hatch="-", place="every stage with parameters", training=True),
    ),
    memory_kinds=(
        MemoryKind("parameters", "#7766BB"),
        MemoryKind("gradients", "#AA4444"),
        MemoryKind("optimizer state", "#CC9999"),
        MemoryKind("rows loaded", "#996611", transient=True, family="activations"),
        MemoryKind("activations", "#33EEEE", transient=True),
    ),
    words={
        "gathered": "no gather: the last stage holds the output",
        "not_gathered": "one stage, nothing to send",
        "carries_most": "{lane} holds the most",
        "own_error": "The stage's own error",
        "computed_memory": "computed from tensor sizes in each stage's process",
    },
)
