"""The Schedule view: the pipeline's bubble, drawn from what ran. One row per stage; each microbatch's forward and
backward in the microbatch's own colour (backward hatched), idle time shaded under them. First the step replayed
with each stage on a device of its own (read/bubble.py: each pass its own CPU time, in the order torch ran it, after
what it needs), which is the bubble the schedule makes and shrinks toward (S - 1) / (M + S - 1) as the microbatches
grow: the lesson, whole on a projector's first screen; then, a figure of its own under it, the same passes on this
host's wall clock, where the stages' processes also wait for its few cores and for gloo.

    schedule_figure(trace, batch=1)      # step 2 (the views open on it: the first also agrees the shapes)
    wall_clock_figure(trace, batch=1)    # the same step as this host's clock saw it
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from dpviz.echo import plotly_text
from dpviz.analysis.wording import counted, plural
from dpviz.engines.pipeline.read.bubble import (CPU, DEVICE, SCHEDULE_NAMES, Replay, computes, ended, host_cores,
                                                idle_share, percent, replay, textbook_share, window)
from dpviz.engines.pipeline.read.grid_fit import (TAG_PX, TAG_SIZE, TEXT_PAD_PX, cell_labels, cell_px, plot_px,
                                                  tagged)
from dpviz.figures.text_fit import text_px
from dpviz.figures.colors import (IDLE_GREY, MAX_DEVICES, OUTLINE, TEXT, THEME_TEXT, WHITE, device_color, hatch_ink,
                                  text_color_on)
from dpviz.figures.sizes import LEGEND_SIZE
from dpviz.figures.arguments import check_batch
from dpviz.figures.layout import styled
from dpviz.figures.presenting import CELL_TEXT
from dpviz.figures.timeline_look import SWATCH_EDGE
from dpviz.figures.trace_words import backend_note
from dpviz.engines.pipeline.vocabulary import VOCABULARY
from dpviz.trace import Trace

LOSS_COLOR = "#444444"  # the last stage's losses: thin, dark, none a microbatch's colour
# A stage's row in a panel, and the title block and the x axis: both grids of 4 stages on a projector's first screen,
# under the page's step slider, with the room between them that their ticks and the lower one's title take.
ROW_PX, BASE_PX = 30, 150  # both grids of 4 stages on a projector's first screen, under the banner and the tabs
KINDS = {"F": ("forward", ""), "B": ("backward", "x")}


def microbatch_color(microbatch: int) -> str:
    """A microbatch's colour: the device palette's, in turn (the seventeenth and later repeat; their label tells)."""
    return device_color(microbatch % 16)


def label_colors(microbatches: list[int]) -> list[str]:
    """The colour of each bar's label on its microbatch's colour: black or white, whichever reads."""
    return [text_color_on(microbatch_color(m)) for m in microbatches]


def hatch(pattern: str, label_ink: str) -> dict:
    """A backward's hatch (`pattern`) in the ink its label does not take: white under black text, black under white,
    so the hatch lightens or darkens the colour away from the label and never takes from its contrast."""
    return dict(shape=pattern, fgcolor=hatch_ink(label_ink), solidity=0.35, fillmode="overlay")


@dataclass(frozen=True)
class PassGroup:
    """The passes one bar trace draws: every forward, or the backwards of one microbatch colour. plotly draws a hatch
    in the colour asked for only on a trace of one colour: given a list of colours it picks its own ink, which was
    white over the blue under a white label."""

    kind: str  # "F" or "B"
    colour: int | None  # the device palette's index of the backwards' colour; None: the forwards, each its own
    first: bool  # the first trace of its kind: the one the legend shows

    @property
    def label(self) -> str:
        return KINDS[self.kind][0]

    def holds(self, kind: str, microbatch: int) -> bool:
        return kind == self.kind and (self.colour is None or microbatch % MAX_DEVICES == self.colour)

    def marker(self, microbatches: list[int], **line: Any) -> dict:
        """The bars' fill, outline (`line`) and, for a backward, its hatch in the ink its label does not take."""
        if self.colour is None:
            return dict(color=[microbatch_color(m) for m in microbatches], line=line)
        color = device_color(self.colour)
        return dict(color=color, line=line, pattern=hatch(KINDS[self.kind][1], text_color_on(color)))


def pass_groups(microbatches: int) -> list[PassGroup]:
    """The bar traces of a schedule of `microbatches`: the forwards in one, the backwards one per colour; the same
    traces in every frame of an animation, whichever passes it shows."""
    return [PassGroup("F", None, True)] + [PassGroup("B", c, c == 0) for c in range(min(microbatches, MAX_DEVICES))]


# The legend names a pass's kind, not its colour: each bar takes its microbatch's colour, so the swatch is open (its
# outline and, for the backward, its hatch), and the legend's title says whose colour fills it (as the timeline's).
PASS_LEGEND_TITLE = "open swatch: drawn in its microbatch's colour"


def pass_legend(fig: go.Figure, titled: bool = True, **where: Any) -> None:
    """One legend-only entry per kind of pass, open, in the legend group of the bars it stands for (clicking it hides
    them all), and the legend's title (`titled`; else the figure's notes say it); where the first bar's blue stood for
    every microbatch's forward."""
    for kind, (label, pattern) in KINDS.items():
        fig.add_trace(go.Bar(
            x=[None], y=[None], orientation="h", name=label, legendgroup=label, showlegend=True, hoverinfo="skip",
            marker=dict(color="rgba(0,0,0,0)", line=dict(color=SWATCH_EDGE, width=2),
                        pattern=dict(shape=pattern, fgcolor=SWATCH_EDGE, solidity=0.35, fillmode="overlay")
                        if pattern else None)), **where)
    if not titled:
        return
    # in the ink and at the entries' size, which Presenting scales with them (plotly's own is smaller and grey)
    fig.update_layout(legend_title=dict(text=PASS_LEGEND_TITLE, side="top",
                                        font=dict(color=THEME_TEXT, size=LEGEND_SIZE)))


def stage_label(stage: int) -> str:
    return VOCABULARY.lane_name(stage)  # "stage 1" for lane 0, as every view names it


def schedule_words(trace: Trace) -> str:
    """'GPipe, 4 stages, 8 microbatches': the run's schedule, in a caption's words."""
    config = trace.config
    return (f"{SCHEDULE_NAMES[config.schedule]}, {plural(config.gpus, 'stage')}, "
            f"{plural(config.microbatches, 'microbatch')}")


def _passes(fig: go.Figure, row: int, bars: list[tuple[str, int, int, float, float]], unit: str, legend: bool,
            span: float, single: bool = False) -> None:
    """Forward and backward bars (kind, stage, microbatch, start, length) in one panel whose axis is `span` long, each
    labelled where its cell holds the label on the narrowest chart (grid_fit), and the others' microbatches on tags
    over them, as many as fit: many microbatches leave every cell too narrow for a label of its own."""
    labels, size = cell_labels([(b[0], b[2]) for b in bars], [cell_px(b[4], span) for b in bars])
    where = {} if single else dict(row=row, col=1)
    if legend:
        pass_legend(fig, **where)
    for group in pass_groups(max((b[2] for b in bars), default=0) + 1):
        mine = [(b, text) for b, text in zip(bars, labels) if group.holds(b[0], b[2])]
        label = group.label
        hatched = group.colour is not None
        fig.add_trace(go.Bar(
            y=[stage_label(b[1]) for b, _ in mine], x=[b[4] for b, _ in mine], base=[b[3] for b, _ in mine],
            orientation="h", name=label, legendgroup=label, showlegend=False, width=0.8,
            marker=group.marker([b[2] for b, _ in mine], color=OUTLINE, width=1),
            text=None if hatched else [text for _, text in mine], textposition="inside", insidetextanchor="middle",
            textangle=0, textfont=dict(color=label_colors([b[2] for b, _ in mine]), size=size), meta=CELL_TEXT,
            customdata=[[b[2] + 1, b[3], b[4]] for b, _ in mine],
            hovertemplate=f"%{{y}}: {label} of microbatch %{{customdata[0]}}<br>from %{{customdata[1]:.2f}} {unit}, "
                          f"%{{customdata[2]:.2f}} {unit}<extra></extra>"), **where)
        if hatched:
            _plates(fig, [(b, text) for b, text in mine if text], group, size, span, where)
    tags = []
    for stage in sorted({b[1] for b in bars}):
        row_bars = sorted(((b, text) for b, text in zip(bars, labels) if b[1] == stage), key=lambda p: p[0][3])
        centres = [cell_px(b[3] + b[4] / 2, span) for b, _ in row_bars]
        tags += [b for (b, _), keep in zip(row_bars, tagged(centres, [bool(t) for _, t in row_bars])) if keep]
    if tags:
        fig.add_trace(go.Scatter(
            x=[b[3] + b[4] / 2 for b in tags], y=[stage_label(b[1]) for b in tags], mode="markers+text",
            text=[counted(b[2]) for b in tags], textposition="middle center",
            textfont=dict(size=TAG_SIZE, color=TEXT), meta=CELL_TEXT, name="microbatch", showlegend=False,
            marker=dict(symbol="square", size=TAG_PX, color=WHITE, line=dict(color=OUTLINE, width=1)),
            hoverinfo="skip", cliponaxis=False), **where)


PLATE_WIDTH = 0.74  # of a row: inside the bar's 0.8, so its outline still shows over and under the plate


def _plates(fig: go.Figure, labelled: list, group: PassGroup, size: float, span: float, where: dict) -> None:
    """A backward's label on a plain plate of its bar's colour, over the middle of its hatch: on the hatch alone the
    glyph sat on a weave of the fill and the hatch's ink, no colour of it in the majority. Each plate is the label's
    width on the narrowest chart (its cell holds that there, grid_fit), so wider charts only widen the hatch around."""
    if not labelled:
        return
    lengths = [min(b[4], (text_px(text, size) + 2 * TEXT_PAD_PX) * span / plot_px()) for b, text in labelled]
    fig.add_trace(go.Bar(
        y=[stage_label(b[1]) for b, _ in labelled], x=lengths,
        base=[b[3] + (b[4] - length) / 2 for (b, _), length in zip(labelled, lengths)], orientation="h",
        name=group.label, legendgroup=group.label, showlegend=False, width=PLATE_WIDTH, hoverinfo="skip",
        marker=dict(color=device_color(group.colour), line=dict(width=0)),
        text=[text for _, text in labelled], textposition="inside", insidetextanchor="middle", textangle=0,
        textfont=dict(color=label_colors([b[2] for b, _ in labelled]), size=size), meta=CELL_TEXT), **where)


def _idle(fig: go.Figure, row: int, stages: int, length: float, unit: str, legend: bool, single: bool = False) -> None:
    names = [stage_label(s) for s in range(stages)]
    fig.add_trace(go.Bar(
        y=names, x=[length] * stages, base=[0.0] * stages, orientation="h", name="idle (waiting)", legendgroup="idle",
        showlegend=legend, marker=dict(color=IDLE_GREY, line=dict(width=0)), width=0.8,
        hovertemplate="%{y}: waiting, unless a pass is drawn<extra></extra>"), **({} if single else dict(row=row, col=1)))


HEADLINE_LIMIT = 90  # characters of a failure's first line in a title


def stopped_figure(trace: Trace, batch: int) -> go.Figure:
    """A step that did not end (the run failed in it): the passes it ran, as measured, and the failure; no bubble,
    no textbook grid, which are a whole step's."""
    stages = len(trace.lanes)
    spans = [s for s in computes(trace, batch) if s.phase != "loss"]
    fig = go.Figure()
    if spans:
        start = min(s.start for s in spans)
        end = max(s.end for s in spans)
        _idle(fig, 1, stages, (end - start) * 1e3, "ms", True, single=True)
        _passes(fig, 1, [("F" if s.phase == "forward" else "B", s.lane, s.microbatch, (s.start - start) * 1e3,
                          s.duration * 1e3) for s in spans], "ms", True, (end - start) * 1e3, single=True)
        fig.update_xaxes(title="milliseconds since the step's first forward", range=[0, (end - start) * 1e3])
    else:
        _idle(fig, 1, stages, 1.0, "ms", False, single=True)
        fig.update_xaxes(showticklabels=False, title="no microbatch's forward ended")
    names = [stage_label(s) for s in range(stages)][::-1]
    fig.update_layout(barmode="overlay", uniformtext=dict(mode="hide", minsize=9), bargap=0.2)
    fig.update_yaxes(categoryorder="array", categoryarray=names, title=None)
    failure = trace.failure
    who = f"{stage_label(failure.replica)} " if failure is not None and failure.replica is not None else ""
    title = (f"Step {counted(batch)} did not end: {who}failed with "
             f"{plotly_text(failure.headline if failure else 'an error', HEADLINE_LIMIT)}")
    return styled(fig, title, [schedule_words(trace), "the passes that ran before it; the bubble is a whole step's",
                               backend_note(trace)], height=BASE_PX + ROW_PX * stages + 90)


def clock_note(replayed: Replay) -> str:
    """How the replay's passes were timed, in a caption's words."""
    if replayed.clock == CPU:
        return "replayed: each pass its own CPU time, in the order torch ran it; sends take no time"
    if replayed.clock == DEVICE:
        return "replayed: each pass its time on its stage's own GPU, in the order torch ran it; sends take no time"
    return ("this file keeps no CPU time per pass: replayed from wall times, which count waiting for a core")


def host_words(trace: Trace) -> str:
    """'4 processes on this host's 2 cores': what the wall clock below the replay was measured on."""
    stages = len(trace.lanes)
    if trace.backend == "cuda":
        return f"{stages} processes, a GPU each, over NCCL"
    cores = host_cores(trace)
    on = f"this host's {cores:,} core{'s' if cores > 1 else ''}" if cores else "this host's shared cores"
    return f"{stages} processes on {on}"


def _losses(fig: go.Figure, losses: list, ms, single: bool) -> None:
    """The last stage's losses: thin dark bars, none a microbatch's colour."""
    if losses:
        fig.add_trace(go.Bar(
            y=[stage_label(s.lane) for s in losses], x=[s.duration * 1e3 for s in losses],
            base=[ms(s.start) for s in losses], orientation="h", name="loss", width=0.3,
            marker=dict(color=LOSS_COLOR), customdata=[[s.microbatch + 1] for s in losses],
            hovertemplate="%{y}: loss of microbatch %{customdata[0]}<extra></extra>"),
            **({} if single else dict(row=1, col=1)))


def _measured(fig: go.Figure, trace: Trace, batch: int, legend: bool) -> float:
    """Step `batch`'s passes on this host's wall clock, into `fig`'s one panel; its length in milliseconds."""
    start, end = window(trace, batch)
    ms = lambda t: (t - start) * 1e3
    stages = len(trace.lanes)
    _idle(fig, 1, stages, ms(end), "ms", legend, single=True)
    spans = [s for s in computes(trace, batch) if s.phase != "loss"]
    _passes(fig, 1, [("F" if s.phase == "forward" else "B", s.lane, s.microbatch, ms(s.start), s.duration * 1e3)
                     for s in spans], "ms", legend, ms(end), single=True)
    _losses(fig, [s for s in computes(trace, batch) if s.phase == "loss"], ms, single=True)
    fig.update_xaxes(title="milliseconds since the step's first forward", range=[0, ms(end)])
    return ms(end)


def _rows(fig: go.Figure, stages: int) -> None:
    fig.update_layout(barmode="overlay", uniformtext=dict(mode="hide", minsize=9), bargap=0.2)
    fig.update_yaxes(categoryorder="array", categoryarray=[stage_label(s) for s in range(stages)][::-1], title=None)


def schedule_figure(trace: Trace, batch: int = 0) -> go.Figure:
    """Step `batch` (0-based) of a pipeline run, stage by stage, replayed with each stage on a device of its own: the
    bubble the schedule makes. A file that kept no CPU time per pass draws the wall clock instead, and says so.
    wall_clock_figure draws the same step as this host's clock measured it, under this one on the page."""
    check_batch(trace, batch)
    if not ended(trace, batch):
        return stopped_figure(trace, batch)
    stages, micro = len(trace.lanes), trace.config.microbatches
    replayed = replay(trace, batch)
    measured, textbook = idle_share(trace, batch), textbook_share(stages, micro)
    fig = go.Figure()
    if replayed:
        length = replayed.length * 1e3
        _idle(fig, 1, stages, length, "ms", True, single=True)
        _passes(fig, 1, [(kind, stage, m, at * 1e3, size * 1e3) for stage, row in enumerate(replayed.passes)
                         for kind, m, at, size in row], "ms, replayed", True, length, single=True)
        # The axis spans the bars exactly: the labels were fitted to that width (grid_fit).
        fig.update_xaxes(title="milliseconds, each stage on a device of its own", range=[0, length])
    else:
        _measured(fig, trace, batch, True)
    shown = replayed.share if replayed else measured
    title = (f"Step {counted(batch)}: the bubble leaves the stages idle {percent(shown)} of the step"
             + (", replayed" if replayed else ", measured") + f"; the textbook's {percent(textbook)}")
    notes = [schedule_words(trace), f"textbook: (S − 1) / (M + S − 1) = {stages - 1} / {micro + stages - 1}"]
    if replayed:
        notes += [clock_note(replayed), f"this host's wall clock: idle {percent(measured)}, drawn below"]
    else:
        notes.append(f"this host's wall clock, {host_words(trace)}")
    notes += ["stage 1 is torch's stage_index=0", backend_note(trace)]
    _rows(fig, stages)
    return styled(fig, title, notes, height=BASE_PX + ROW_PX * stages)


def wall_clock_figure(trace: Trace, batch: int = 0) -> go.Figure | None:
    """The same step on this host's wall clock, where the stages' processes also wait for its cores and for gloo;
    None where the Schedule already draws it (a file without CPU times) or the step did not end."""
    check_batch(trace, batch)
    if not ended(trace, batch) or not replay(trace, batch):
        return None
    stages = len(trace.lanes)
    fig = go.Figure()
    _measured(fig, trace, batch, True)
    _rows(fig, stages)
    title = (f"Step {counted(batch)} on this host's wall clock: idle {percent(idle_share(trace, batch))}, "
             f"{host_words(trace)}")
    why = ("each stage's process also waits for a core and for gloo, which a device of its own would not"
           if trace.backend != "cuda" else "each stage also waits for NCCL's sends, which the replay counts as none")
    return styled(fig, title, [schedule_words(trace), why, backend_note(trace)], height=BASE_PX + ROW_PX * stages)
