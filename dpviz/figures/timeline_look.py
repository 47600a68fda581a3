"""How the timeline draws each phase, in both of its panels, and the legend that says so.

One place decides a phase's fill, hatch and thickness, so the step panel, the measured panel and the
legend cannot disagree. Phases that run on a device (forward, backward, and in training the loss, the
sum and the step) take the colour of the lane they sit on: their legend swatch is open (outline and
hatch only) and the legend's title says the colour is the lane's; each lane's name carries its
colour's swatch (■, ◆ for GPUs 8-15, whose bars are also hatched). Host phases keep the vocabulary's
own colour, and their swatch is that colour.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from dpviz.trace.vocabulary import EVERY_LANE, HOST, ONE_LANE, Vocabulary
from dpviz.figures.colors import IDLE_GREY, OUTLINE, device_color, device_pattern, device_symbol, with_alpha

IDLE = "idle"
IDLE_LABEL = "idle (no rows)"
IDLE_FILL = IDLE_GREY  # solid, the grey idle is in every view
GUIDE = with_alpha("#808080", 0.55)  # outlines, dividers and whiskers: readable on white and near-black
BAND = with_alpha("#808080", 0.10)  # a batch's extent behind the lanes
# The edge and hatch of an open swatch (no fill of its own): an opaque mid grey, 3.9:1 on white and
# 4.8:1 on the dark page (WCAG 1.4.11 asks 3:1), where GUIDE's translucent grey all but vanished.
SWATCH_EDGE = "#808080"
LEGEND_TITLE = "open swatch: drawn in its lane's GPU colour"
# Thickness of a bar on its lane: what runs on every lane thick, one lane's steps medium, host copies thin.
WIDTH = {EVERY_LANE: 0.8, ONE_LANE: 0.55, HOST: 0.35, IDLE: 0.8}


def drawn_phases(vocabulary: Vocabulary) -> list[str]:
    """Phases drawn as bars, in pipeline order (an envelope such as DataParallel's "apply" is not)."""
    return [p.name for p in vocabulary.phases if p.drawn]


def in_lane_colour(vocabulary: Vocabulary, phase: str) -> bool:
    """Whether the phase's bars take the colour of the lane they sit on."""
    return phase != IDLE and vocabulary.phase(phase).color == "lane"


def bar_width(vocabulary: Vocabulary, phase: str) -> float:
    return WIDTH[IDLE] if phase == IDLE else WIDTH[vocabulary.phase(phase).where]


def bar_look(vocabulary: Vocabulary, phase: str, devices: np.ndarray) -> dict:
    """marker colour and hatch of `phase`'s bars on lanes `devices` (one value per bar where they differ)."""
    if phase == IDLE:
        return dict(color=IDLE_FILL, pattern=dict(shape=""))
    p = vocabulary.phase(phase)
    if p.color != "lane":
        return dict(color=p.color, pattern=dict(shape=""))
    colors = [device_color(int(d)) for d in devices]
    # A phase's own hatch tells it apart from the forward on the same lane; without one, GPUs 8-15 keep
    # theirs, so they differ from GPUs 0-7 by more than colour.
    shape = p.hatch or [device_pattern(int(d)) for d in devices]
    # overlay: the hatch's lines over the lane's colour (plotly's default without a template is lines alone)
    return dict(color=colors, pattern=dict(shape=shape, fgcolor="white", solidity=0.35, fillmode="overlay"))


def legend_label(vocabulary: Vocabulary, phase: str) -> str:
    return IDLE_LABEL if phase == IDLE else vocabulary.phase(phase).label


def legend_swatches(vocabulary: Vocabulary, phases: list[str]) -> list[go.Bar]:
    """One legend-only entry per phase drawn, in pipeline order, each in the legend group of the bars it
    stands for: clicking it hides them all. (A cut of the time axis is a mark on the axis, named in its
    title: not a state of a lane, so not in the legend.)"""
    entries = []
    for phase in ([IDLE] if IDLE in phases else []) + [p for p in drawn_phases(vocabulary) if p in phases]:
        if phase == IDLE or not in_lane_colour(vocabulary, phase):
            marker = dict(color=bar_look(vocabulary, phase, np.array([0]))["color"], line=dict(color=OUTLINE, width=0.3))
        else:  # open: the fill is the lane's colour, so the swatch shows only the hatch
            hatch = vocabulary.phase(phase).hatch
            marker = dict(color="rgba(0,0,0,0)", line=dict(color=SWATCH_EDGE, width=2),
                          pattern=dict(shape=hatch, fgcolor=SWATCH_EDGE, solidity=0.35, fillmode="overlay") if hatch else None)
        entries.append(go.Bar(x=[None], y=[None], orientation="h", name=legend_label(vocabulary, phase),
                              legendgroup=phase, showlegend=True, marker=marker, hoverinfo="skip"))
    return entries


def lane_label(vocabulary: Vocabulary, lane: int) -> str:
    """'■ GPU 3': the lane's name after a swatch of its colour (◆ for GPUs 8-15, as their markers are).
    Only the swatch is coloured; the name inherits the page's text colour."""
    glyph = "◆" if device_symbol(lane) == "diamond" else "■"
    return f'<span style="color:{device_color(lane)}">{glyph}</span> {vocabulary.lane_name(lane)}'


def phase_hover(vocabulary: Vocabulary, phase: str, idle: str) -> str:
    """A bar's hover in both panels: "GPU 3: forward: rows 12 + 4" (the lane's rows when it runs on every
    lane), or `idle` for an idle band; customdata holds batch, rows and first row, in that order."""
    noun = vocabulary.lane_noun
    if phase == IDLE:
        return f"{noun} %{{y}}: {idle}"
    p = vocabulary.phase(phase)
    rows = " %{customdata[2]} + %{customdata[1]}" if p.where == EVERY_LANE else ""
    return f"{noun} %{{y}}: {p.hover}{rows}"


def draw_order(vocabulary: Vocabulary, phases: set[str]) -> list[str]:
    """Idle bands first, then what runs on every lane, one lane's steps, and host copies last: a thin
    bar is never hidden under a thick one."""
    rank = {EVERY_LANE: 1, ONE_LANE: 2, HOST: 3}
    named = [p for p in drawn_phases(vocabulary) if p in phases]
    return ([IDLE] if IDLE in phases else []) + sorted(named, key=lambda p: rank[vocabulary.phase(p).where])


def phase_bars(vocabulary: Vocabulary, phase: str, devices: np.ndarray, base: np.ndarray, length: np.ndarray, *,
               customdata: np.ndarray, hover: str, axes: tuple[str, str]) -> go.Bar:
    """One trace holding every bar of `phase` in one panel, each in its look (bar_look), in the phase's
    legend group; its legend entry is the swatch legend_swatches draws."""
    look = bar_look(vocabulary, phase, devices)
    return go.Bar(
        orientation="h", y=devices, x=length, base=base, width=bar_width(vocabulary, phase),
        name=legend_label(vocabulary, phase), legendgroup=phase, showlegend=False,
        marker=dict(color=look["color"], pattern=look["pattern"], line=dict(color=OUTLINE, width=0.3)),
        customdata=customdata, hovertemplate=hover + "<extra></extra>", xaxis=axes[0], yaxis=axes[1],
    )
