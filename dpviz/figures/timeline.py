"""Timeline: one lane per device, the scatter, replicate, forward and gather of each batch in measured time.

Host phases run once per batch on the host thread but move data to or from every device a replica
ran on, so each is drawn (as a thin bar) on every such device; forwards are thick bars in the device's
colour; a device with no replica in a batch shows a grey idle band over that batch. A training run adds
each replica's backward (thick, hatched, in the device's colour) and, on their own lanes, the loss, the
sum of the replicas' gradients and the SGD step (medium bars, each phase its own hatch). Past
MAX_MARKS the figure shows a window of consecutive batches and says so in its title.

A forward on 8 GPUs lasts a few tenths of a percent of the run, under a pixel, so no bar is drawn
shorter than MIN_SHARE of the window (the hover keeps the measured times and the note says so). The
legend has one entry per phase, in rows above the lanes: the lane names the device.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..tables import batch_spans
from ..trace import Trace
from .bounds import MAX_MARKS
from ..vocabulary import EVERY_LANE, HOST, ONE_LANE, Vocabulary
from .colors import IDLE_GREY, OUTLINE, device_color, device_pattern, with_alpha
from .style import backend_note, check_batch, plural, styled
from .timeline_ddp import timeline_ddp_figure
from .timeline_ddp import window_size as ddp_window_size

TIMELINE_COLUMNS = ["device", "phase", "batch", "start_ms", "end_ms", "rows", "first_row"]
# Legend entries: one per phase (the vocabulary's short labels), five to a row; hovers keep the longer words.
IDLE_LABEL = "idle (no rows)"
LEGEND_COLUMNS = 5
# The shortest drawn span, as a share of the window's time: about 4 px on an 800 px wide plot.
MIN_SHARE = 1 / 200
# Vertical layout in pixels: title and a two-line subtitle, then the legend's rows, then the lanes.
TITLE_PX, TITLE_Y_PX = 112, 38
LEGEND_ROW_PX, LEGEND_GAP_PX = 28, 6
LANE_BASE_PX, LANE_PX = 100, 34
BOTTOM_PX, NOTE_PX = 60, 60


def window_size(trace: Trace) -> int:
    """How many consecutive batches one timeline shows: as many as fit in MAX_MARKS."""
    if trace.engine == "ddp":
        return ddp_window_size(trace)
    lanes = max(1, len(trace.lanes))
    # At most the forward and every drawn host phase on each lane (DataParallel: scatter, replicate,
    # forward, gather), and in training each later lane phase once per lane or once per batch.
    marks_per_batch = (1 + len(_drawn_host(trace.vocabulary))) * lanes
    for phase in _later(trace.vocabulary) if trace.config.train else ():
        marks_per_batch += lanes if trace.vocabulary.phase(phase).where == EVERY_LANE else 1
    return max(1, MAX_MARKS // marks_per_batch)


def _drawn_host(vocabulary: Vocabulary) -> list[str]:
    """Host phases drawn on every lane that took part ("apply", the envelope of the forwards, is not)."""
    return [p.name for p in vocabulary.phases if p.where == HOST and p.drawn]


def _later(vocabulary: Vocabulary) -> list[str]:
    """The lane phases after the forward: every-lane ones (backward) first, then one-lane ones."""
    rest = [p for p in vocabulary.phases if p.where != HOST and p.name != "forward"]
    return [p.name for p in sorted(rest, key=lambda p: p.where != EVERY_LANE)]


def prepare_timeline(trace: Trace, first_batch: int, last_batch: int) -> pd.DataFrame:
    """One row per drawn bar of batches first_batch..last_batch: device, phase, batch, times in ms, rows."""
    records = []
    for b in range(first_batch, last_batch + 1):
        replicas = trace.replicas(b)
        host = trace.host_spans(b)
        for span in replicas:
            records.append((span.lane, "forward", b, span.start, span.end, span.rows, span.row_offset))
            for phase in _drawn_host(trace.vocabulary):
                if phase in host:
                    h = host[phase]
                    records.append((span.lane, phase, b, h.start, h.end, span.rows, span.row_offset))
        spans = list(host.values()) + replicas
        for phase in _later(trace.vocabulary) if trace.config.train else ():  # window_size counts these
            for span in batch_spans(trace, b, phase):
                records.append((span.lane, phase, b, span.start, span.end, span.rows, span.row_offset if span.rows else -1))
                spans.append(span)
        used = {s.lane for s in replicas}
        if spans:
            start, end = min(s.start for s in spans), max(s.end for s in spans)
            for lane in trace.lanes:
                if lane.id not in used:
                    records.append((lane.id, "idle", b, start, end, 0, -1))
    table = pd.DataFrame.from_records(records, columns=TIMELINE_COLUMNS)
    table["start_ms"] *= 1e3
    table["end_ms"] *= 1e3
    return table


def min_width_ms(table: pd.DataFrame) -> float:
    """The narrowest a bar is drawn: MIN_SHARE of the time the window spans (0 for an empty table)."""
    if table.empty:
        return 0.0
    return MIN_SHARE * float(table["end_ms"].max() - table["start_ms"].min())


def _bar(part: pd.DataFrame, *, name: str, color: str | list[str], width: float, hover: str, min_ms: float,
         pattern: str | list[str] = "", legendgroup: str | None = None) -> go.Bar:
    duration = (part["end_ms"] - part["start_ms"]).to_numpy()
    # A span shorter than min_ms is drawn min_ms long from its true start; the hover keeps its measured duration.
    drawn = np.maximum(duration, min_ms)
    customdata = np.column_stack([part["batch"], part["rows"], part["first_row"], part["start_ms"], duration])
    return go.Bar(
        orientation="h", y=part["device"].to_numpy(), x=drawn, base=part["start_ms"].to_numpy(),
        width=width, name=name, legendgroup=legendgroup or name,
        marker=dict(color=color, line=dict(color=OUTLINE, width=0.3), pattern=dict(shape=pattern, fgcolor="white")),
        customdata=customdata, hovertemplate=hover + "<extra></extra>",
    )


def _by_device(part: pd.DataFrame) -> dict:
    """Per-bar colour and hatch of the device each bar sits on: one trace can hold every device's bars."""
    return dict(color=[device_color(d) for d in part["device"]], pattern=[device_pattern(d) for d in part["device"]])


def plot_timeline(table: pd.DataFrame, *, vocabulary: Vocabulary, devices: int, title: str, notes: list[str]) -> go.Figure:
    """Horizontal bars on one lane per device: thick forwards (solid) and backwards (hatched), medium
    loss, sum and step, thin host phases, grey idle bands. One legend entry per phase: the lane and the
    colour both say which device, so the legend stays a row or two above the lanes at any device count."""
    fig = go.Figure()
    min_ms = min_width_ms(table)
    when = "<br>batch %{customdata[0]:,}<br>start %{customdata[3]:.3f} ms, took %{customdata[4]:.3f} ms"
    noun = vocabulary.lane_noun
    idle = table[table["phase"] == "idle"]
    if len(idle):
        fig.add_trace(_bar(idle, name=IDLE_LABEL, color=with_alpha(IDLE_GREY, 0.6), width=0.8, min_ms=min_ms,
                           hover=f"{noun} %{{y}}: idle, no rows of this batch" + when))
    for phase in (p for p in vocabulary.phases if p.where == EVERY_LANE):  # thick, in the lane's colour
        part = table[table["phase"] == phase.name]
        if len(part):  # a hatch of the phase's own over every lane's colour, or each lane's own hatch
            look = (dict(color=[device_color(d) for d in part["device"]], pattern=phase.hatch) if phase.hatch
                    else _by_device(part))
            fig.add_trace(_bar(part, name=phase.label, width=0.8, min_ms=min_ms, **look,
                               hover=f"{noun} %{{y}} {phase.hover} %{{customdata[2]}} + %{{customdata[1]}}" + when))
    for phase in (p for p in vocabulary.phases if p.where == ONE_LANE):  # medium, each its own hatch
        part = table[table["phase"] == phase.name]
        if len(part):
            fig.add_trace(_bar(part, name=phase.label, color=[device_color(d) for d in part["device"]],
                               width=0.55, min_ms=min_ms, pattern=phase.hatch, hover=f"{noun} %{{y}} {phase.hover}" + when))
    for name in _drawn_host(vocabulary):  # drawn last: a widened span under them never hides them
        phase, part = vocabulary.phase(name), table[table["phase"] == name]
        if len(part):
            fig.add_trace(_bar(part, name=phase.label, color=phase.color, width=0.35, min_ms=min_ms,
                               hover=f"{noun} %{{y}}: {phase.hover}" + when))
    fig.update_layout(barmode="overlay", bargap=0.1, dragmode="zoom", hovermode="closest")
    fig.update_yaxes(  # GPU 0 on top; a fixed range keeps every lane even when zooming in time
        title_text="device", autorange=False, range=[devices - 0.5, -0.5], tickmode="array",
        tickvals=list(range(devices)), ticktext=[vocabulary.lane_name(d) for d in range(devices)],
    )
    fig.update_xaxes(title_text="time since the run began (ms, measured; drag to zoom, double-click to reset)")
    rows = legend_rows(len(fig.data))
    top = TITLE_PX + rows * LEGEND_ROW_PX + LEGEND_GAP_PX
    plot_px = LANE_BASE_PX + LANE_PX * devices
    styled(fig, title, notes, height=top + plot_px + BOTTOM_PX)
    fig.update_layout(
        margin=dict(t=top, b=BOTTOM_PX),
        title=dict(y=1 - TITLE_Y_PX / fig.layout.height, yanchor="middle"),
        # A row of entries between the subtitle and the lanes, five to a row, so the row count is known.
        legend=dict(orientation="h", x=0, xanchor="left", y=1 + LEGEND_GAP_PX / plot_px, yanchor="bottom",
                    entrywidth=1 / LEGEND_COLUMNS, entrywidthmode="fraction", traceorder="normal"),
    )
    return fig


def legend_rows(entries: int) -> int:
    """Rows the horizontal legend takes: LEGEND_COLUMNS entries to a row."""
    return max(1, -(-entries // LEGEND_COLUMNS))


def timeline_figure(trace: Trace, first_batch: int = 0, batches: int | None = None) -> go.Figure:
    """Timeline of `batches` consecutive batches from `first_batch` (default: as many as the bound allows)."""
    check_batch(trace, first_batch)
    limit = window_size(trace)
    count = limit if batches is None else batches
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= limit:
        raise ValueError(f"batches must be between 1 and {limit} for this trace, got {batches!r}")
    last_batch = min(len(trace.batches), first_batch + count) - 1
    if trace.engine == "ddp":  # ranks are processes with an all-reduce row each: a layout of their own
        return timeline_ddp_figure(trace, first_batch, last_batch)
    table = prepare_timeline(trace, first_batch, last_batch)
    total = len(trace.batches)
    shown = last_batch - first_batch + 1
    if shown == total:
        title = f"Timeline of all {plural(total, 'batch')}, one lane per {trace.vocabulary.lane_noun}"
    else:
        title = f"Timeline of batches {first_batch:,}-{last_batch:,} of {total:,} (a window of {plural(shown, 'batch')})"
    training = bool((table["phase"] == "backward").any())
    bars = ("solid: forward · hatched: backward · thin: host phases" if training
            else "thick: forward on the device · thin: host phases that move data to or from it")
    second_line = []
    min_ms = min_width_ms(table)
    if ((table["end_ms"] - table["start_ms"]) < min_ms).any():
        second_line.append(f"spans shorter than {min_ms:.3g} ms (1/{round(1 / MIN_SHARE)} of this window) "
                           "are drawn that long so they show; the hover gives the measured time")
    if shown < total:
        second_line.append(f"at most {limit:,} batches per window ({MAX_MARKS:,} marks); choose first_batch to move it")
    notes = [backend_note(trace), bars + ("<br>" + " · ".join(second_line) if second_line else "")]
    fig = plot_timeline(table, vocabulary=trace.vocabulary, devices=len(trace.lanes), title=title, notes=notes)
    if training and trace.simulated and len(trace.lanes) > 1:
        fig.add_annotation(
            text=("Simulated: the replicas' backwards run one after another on the CPU autograd thread;<br>"
                  "real GPUs run each device's backward on that device's own thread."),
            x=0, y=0, xref="paper", yref="paper", xanchor="left", yanchor="top", yshift=-62, showarrow=False,
            align="left", font=dict(size=14, color="#555555"),
        )
        # Taller by the note's height, so the lanes keep theirs and the legend its place above them.
        fig.update_layout(height=fig.layout.height + NOTE_PX, margin=dict(b=BOTTOM_PX + NOTE_PX))
    return fig
