"""What the pipeline's grids fit on the narrowest chart: which passes' cells hold their label ("F10", "B3"), and the
room two stacked panels need between them.

    cell_labels([("F", 9), ("B", 0)], [cell_px(1, 39), cell_px(1, 14)])   # (["", "B1"], 10): a slot of 39 is 7 px
    panel_gap_px("As measured: idle 91% of the stages' time")              # the upper panel's ticks, then that title

A panel's labels take one size (CELL_TEXT: presentation() leaves it), and each is kept only where its cell holds it at
the narrowest width the chart is drawn at: left to itself, plotly sizes bar text to fit as it was first drawn and keeps
that size when the page narrows it, so "F10" ran into "F11". The hovers name every pass in full.
"""
from __future__ import annotations

from dpviz.analysis.wording import counted
from dpviz.figures.sizes import FONT_SIZE, LINE_EM, MARGIN, NARROWEST_PX, TICK_SIZE
from dpviz.figures.text_fit import line_count, text_px, wrap

# px, the largest that labels the most cells: at 10, "B4" still fits a slot of 14 (GPipe, 4 stages, 4 microbatches)
LABEL_SIZES = (12, 11, 10)
# The page's chart in an 800 px window, the narrowest it is drawn at: 452 px measured, NARROWEST_PX (468) the most
# it may be; 440 keeps a label inside its cell wherever the page's own width falls between.
CHART_PX = 440
PRESENTING = 1.35  # presentation()'s larger margins leave a projector's plot narrower still
TEXT_PAD_PX = 4  # plotly keeps text 3 px inside a bar's edge; 1 px more for the bar's outline


def plot_px() -> float:
    """The plot's width in pixels on the narrowest chart, in the narrower of the usual and the presenting look."""
    return CHART_PX - (MARGIN["l"] + MARGIN["r"]) * PRESENTING


def cell_px(length: float, span: float) -> float:
    """Pixels a cell `length` long takes of an axis `span` long (slots, milliseconds) on the narrowest chart."""
    return plot_px() * length / span if span > 0 else 0.0


def fits(text: str, size: float, width_px: float) -> bool:
    return text_px(text, size) + 2 * TEXT_PAD_PX <= width_px


def cell_labels(passes: list[tuple[str, int]], widths_px: list[float]) -> tuple[list[str], float]:
    """Each pass's (kind, microbatch) label in its cell, `widths_px` wide on the narrowest chart, and their type
    size: every label of a panel in one form and size, the pass's kind and microbatch ("F10") or, where that labels
    fewer cells, the microbatch alone ("10": the hatch tells a backward); '' where the cell is too narrow for it."""
    forms = ([f"{kind}{counted(m)}" for kind, m in passes], [counted(m) for _, m in passes])
    kept = [([text if fits(text, size, width) else "" for text, width in zip(form, widths_px)], size)
            for form in forms for size in LABEL_SIZES]
    # The first of the most: the full form before the short, the larger size before the smaller.
    return max(kept, key=lambda option: sum(1 for text in option[0] if text))


# The room between two stacked panels: the upper panel's tick labels (plotly sets them a few px under the axis), then
# the lower panel's title, which make_subplots sets on that panel's top edge, as styled() wraps it.
TICKS_PX = TICK_SIZE * LINE_EM + 12
TITLE_GAP_PX = 12  # between the tick labels and the title under them


def panel_gap_px(lower_title: str) -> float:
    """Pixels between an upper panel with x tick labels (no axis title) and a lower one titled `lower_title`."""
    lines = line_count(wrap(lower_title, FONT_SIZE, NARROWEST_PX - MARGIN["l"] - MARGIN["r"] + 10))
    return TICKS_PX + TITLE_GAP_PX + lines * FONT_SIZE * LINE_EM


# A microbatch's number on a white tag over cells too narrow for a label: the tag's side, and its type size.
TAG_PX, TAG_SIZE = 16, 10


def tagged(centres_px: list[float], labelled: list[bool]) -> list[bool]:
    """Of one row's passes (their centres on the narrowest chart, in px, in order), which get a tag: those without a
    label, each a tag's width and a little more from the last tag and from every labelled cell, so no two run
    together and every stretch of narrow cells still says which microbatches it holds."""
    keep, last = [], -float("inf")
    labels = [c for c, has in zip(centres_px, labelled) if has]
    for centre, has in zip(centres_px, labelled):
        clear = centre - last >= TAG_PX + 2 and all(abs(centre - c) >= TAG_PX for c in labels)
        keep.append(not has and clear)
        if keep[-1]:
            last = centre
    return keep
