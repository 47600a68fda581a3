"""A pipeline's own settings: torch's schedule, how many microbatches each batch is cut into, and DDP's that a
process engine shares (epochs, the timeout, the optimizer)."""
from __future__ import annotations

from dataclasses import dataclass

from dpviz.engines.ddp.options import DdpOptions
from dpviz.engines.spec import option, same


@dataclass(frozen=True)
class PipelineOptions:
    schedule: str = option(
        "gpipe", "Schedule",
        "torch's own schedule. gpipe: every microbatch's forward, then every backward (ScheduleGPipe). 1f1b: after a "
        "few forwards, one forward and one backward in turn, so fewer microbatches' activations are kept at once "
        "(Schedule1F1B; it needs at least as many microbatches as stages).",
        kind="choice", choices=("gpipe", "1f1b"))
    microbatches: int = option(
        4, "Microbatches per batch",
        "Each batch is cut into this many equal microbatches, which flow through the stages one after another: more "
        "of them leave less of each step idle. The batch size must divide by it.",
        kind="whole", limits=(1, 64))
    epochs: int = same(DdpOptions, "epochs")
    timeout_s: int = same(DdpOptions, "timeout_s")
    optimizer: str = same(DdpOptions, "optimizer")
