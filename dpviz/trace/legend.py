"""One legend of colours for what moves between devices, the same in every engine's views: keyed by the kind of
collective, never by the engine.

    kind_color("all-reduce")        # '#9C18E4': DDP's bucket all-reduce and any other engine's, alike
    KINDS["send/receive"].words     # 'point to point: one device's tensor to its neighbour'

An engine maps each phase that moves data onto one of these kinds (dpviz.trace.vocabulary.Phase.kind) and each
Move of its traffic too (dpviz.analysis.compare.Move.kind); the phase then takes the kind's colour. Two phases of
one engine with the same kind (FSDP's all-gather in forward and again in backward) tell themselves apart by
their hatch and label, as the compute phases do (forward plain, backward ×, optimizer step -), in every engine.

The eight colours were picked together: each 3:1 against the page's light and dark backgrounds (a thin bar
must show on both), 15 or more apart (CIE76) from each other under normal, protan, deutan and tritan vision
(Machado et al. 2009), and 10 or more from every device colour and idle grey, so that what moves never reads as a
device (tests/test_figures_colors.py checks all three). No torch.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """A kind of collective or copy: its name in every legend, its colour and what it does, in words."""

    name: str
    color: str
    words: str


KINDS: dict[str, Kind] = {kind.name: kind for kind in (
    Kind("scatter", "#A05898", "one device's tensor cut into chunks, one to each device"),
    Kind("broadcast", "#AC5418", "one device's tensor copied whole to every other device"),
    Kind("gather", "#786CD8", "every device's tensor copied to one device"),
    Kind("reduce", "#E40060", "every device's tensor summed onto one device"),
    Kind("all-reduce", "#9C18E4", "every device's tensor summed, the sum on every device"),
    Kind("all-gather", "#007854", "every device's shard copied to every device, each then holding the whole"),
    Kind("reduce-scatter", "#A88448", "every device's tensor summed, each device keeping its own shard of the sum"),
    Kind("send/receive", "#AE06A2", "point to point: one device's tensor to its neighbour"),
)}


def kind_color(name: str) -> str:
    """The colour of kind `name`; ValueError naming the kinds for any other name."""
    if name not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {name!r}")
    return KINDS[name].color
