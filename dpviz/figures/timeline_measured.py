"""The timeline's measured panel: every bar of a few batches where it ran, or one typical batch of many.

Detail (at most DETAIL_BATCHES batches): host phases run once per batch on the host thread but move
data to or from every device a replica ran on, so each is drawn (thin) on every such device; forwards
and backwards are thick in the lane's colour; loss, sum and step medium; a device with no replica in
a batch shows a grey idle band over that batch. Each batch's extent is a shaded band labelled above
the lanes. Quiet stretches far longer than a typical span are cut short (timeline_scale), marked once on
the time axis, and no bar is
drawn shorter than MIN_SHARE of the drawn window (about 4 px on an 800 px window's chart); hovers keep
the measured times.

Summary (more batches): one typical batch (timeline_summary).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dpviz.analysis.batch_facts import batch_spans
from dpviz.analysis.wording import counted
from dpviz.trace import Trace
from dpviz.trace.vocabulary import EVERY_LANE, HOST, Vocabulary
from dpviz.figures.timeline_look import BAND, GUIDE, IDLE, draw_order, phase_bars, phase_hover
from dpviz.figures.timeline_scale import CUT_MARK, TimeScale, robust_cap, time_scale, time_ticks
from dpviz.figures.timeline_summary import HIGH, LOW, batch_extents
from dpviz.figures.colors import THEME_BACKGROUND

TIMELINE_COLUMNS = ["device", "phase", "batch", "start_ms", "end_ms", "rows", "first_row"]
MIN_SHARE = 1 / 200
# The plot's width on the narrowest chart (an 800 px window less the sidebar and the lane names), for
# deciding which batch labels fit above their band.
NARROW_PLOT_PX, CHAR_PX = 390, 7.5
WHEN = "<br>batch %{customdata[6]:,}<br>start %{customdata[3]:.3f} ms, took %{customdata[4]:.3f} ms%{customdata[5]}"
CUT_APART = 0.05  # of the drawn window: about a // mark's width on the narrowest chart, two marks never touch
WHISKER_OFFSET = 0.42  # lanes: just under a lane's thick bars
SHORTENED = f"<br>drawn shorter: a cut ({CUT_MARK}) crosses it"


def _later(vocabulary: Vocabulary) -> list[str]:
    """The lane phases after the forward: every-lane ones (backward) first, then one-lane ones."""
    rest = [p for p in vocabulary.phases if p.where != HOST and p.name != "forward"]
    return [p.name for p in sorted(rest, key=lambda p: p.where != EVERY_LANE)]


def drawn_host(vocabulary: Vocabulary) -> list[str]:
    """Host phases drawn on every lane that took part ("apply", the envelope of the forwards, is not)."""
    return [p.name for p in vocabulary.phases if p.where == HOST and p.drawn]


def prepare_timeline(trace: Trace, first_batch: int, last_batch: int) -> pd.DataFrame:
    """One row per drawn bar of batches first_batch..last_batch: device, phase, batch, times in ms, rows."""
    records = []
    for b in range(first_batch, last_batch + 1):
        replicas = trace.replicas(b)
        host = trace.host_spans(b)
        for span in replicas:
            records.append((span.lane, "forward", b, span.start, span.end, span.rows, span.row_offset))
            for phase in drawn_host(trace.vocabulary):
                if phase in host:
                    h = host[phase]
                    records.append((span.lane, phase, b, h.start, h.end, span.rows, span.row_offset))
        spans = list(host.values()) + replicas
        for phase in _later(trace.vocabulary) if trace.config.train else ():
            for span in batch_spans(trace, b, phase):
                records.append((span.lane, phase, b, span.start, span.end, span.rows, span.row_offset if span.rows else -1))
                spans.append(span)
        used = {s.lane for s in replicas}
        if spans:
            start, end = min(s.start for s in spans), max(s.end for s in spans)
            for lane in trace.lanes:
                if lane.id not in used:
                    records.append((lane.id, IDLE, b, start, end, 0, -1))
    table = pd.DataFrame.from_records(records, columns=TIMELINE_COLUMNS)
    table["start_ms"] *= 1e3
    table["end_ms"] *= 1e3
    return table


def measured_scale(table: pd.DataFrame) -> TimeScale:
    """The drawn time axis of a detailed panel: the cap from the spans' lengths (idle bands, which
    last their whole batch, are not spans)."""
    spans = table[table["phase"] != IDLE]
    return time_scale(table["start_ms"], table["end_ms"], robust_cap(spans["end_ms"] - spans["start_ms"]))


@dataclass(frozen=True)
class Measured:
    """What the detailed panel did to the times, for the figure's notes."""

    scale: TimeScale
    min_ms: float  # the narrowest a bar is drawn
    widened: int  # bars drawn min_ms long because they were shorter
    shortened: int  # bars a cut crosses


def _fits(text: str, share: float) -> bool:
    """Whether `text` fits over a band `share` of the drawn window wide, on the narrowest chart."""
    return share * NARROW_PLOT_PX >= CHAR_PX * len(text) + 6


def batch_labels(extents: list[tuple[int, float, float]], width: float) -> dict[int, str]:
    """batch -> its band's label, counted from 1, in one form for all: 'batch 4' (index 3) when every band
    has room for that, else the bare '4' (the axis of batches is plain from the first band); a band too
    narrow for its form goes unlabelled (its hover still names it)."""
    shares = {b: (x1 - x0) / width if width > 0 else 1.0 for b, x0, x1 in extents}
    long = {b: f"batch {counted(b)}" for b in shares}
    if all(_fits(text, shares[b]) for b, text in long.items()):
        return long
    return {b: counted(b) if _fits(counted(b), share) else "" for b, share in shares.items()}


def add_batch_bands(fig: go.Figure, extents: list[tuple[int, float, float]], axes: tuple[str, str], width: float) -> None:
    """Each batch's extent (drawn x0, x1) as a shaded band behind the lanes, a line where it starts and
    a label above it; `width` is the drawn window's, for choosing the labels that fit."""
    x, y = axes
    labels = batch_labels(extents, width)
    for batch, x0, x1 in extents:
        fig.add_shape(type="rect", xref=x, yref=f"{y} domain", x0=x0, x1=x1, y0=0, y1=1, fillcolor=BAND,
                      line=dict(width=0), layer="below", name=f"batch {batch}")
        fig.add_shape(type="line", xref=x, yref=f"{y} domain", x0=x0, x1=x0, y0=0, y1=1,
                      line=dict(color=GUIDE, width=1), layer="below", name=f"batch {batch} starts")
        if labels[batch]:
            fig.add_annotation(text=labels[batch], x=(x0 + x1) / 2, xref=x, y=1, yref=f"{y} domain", yanchor="bottom",
                               yshift=2, showarrow=False, font=dict(size=13), name=f"batch {batch}")


def add_measured(fig: go.Figure, table: pd.DataFrame, vocabulary: Vocabulary, axes: tuple[str, str]) -> Measured:
    """Every bar of the table where it ran, on the cut time axis, with batch bands and cut marks."""
    scale = measured_scale(table)
    x0, x1 = scale(table["start_ms"].to_numpy()), scale(table["end_ms"].to_numpy())
    window = float(x1.max() - x0.min()) if len(table) else 0.0
    min_ms = MIN_SHARE * window
    took = (table["end_ms"] - table["start_ms"]).to_numpy()
    shortened = scale.shortened(table["start_ms"], table["end_ms"]) & (table["phase"] != IDLE).to_numpy()
    for phase in draw_order(vocabulary, set(table["phase"])):
        on = (table["phase"] == phase).to_numpy()
        part = table[on]
        note = np.where(shortened[on], SHORTENED, "")
        customdata = np.column_stack([part["batch"], part["rows"], part["first_row"], part["start_ms"], took[on]])
        customdata = np.column_stack([customdata.astype(object), note, part["batch"] + 1])  # read from 1
        hover = phase_hover(vocabulary, phase, "idle, no rows of this batch")
        fig.add_trace(phase_bars(vocabulary, phase, part["device"].to_numpy(), x0[on],
                                 np.maximum(x1[on] - x0[on], min_ms), customdata=customdata, hover=hover + WHEN, axes=axes))
    extents = batch_extents(table)
    add_batch_bands(fig, [(int(r.batch), float(scale(r.start_ms)), float(scale(r.end_ms))) for r in extents.itertuples()],
                    axes, window)
    _mark_cuts(fig, scale, axes, int(table["device"].max()) + 1 if len(table) else 0)
    values, texts = time_ticks(scale, count=8)
    fig.update_layout({_axis(axes[0]): dict(tickmode="array", tickvals=values, ticktext=texts)})
    spans = (table["phase"] != IDLE).to_numpy()
    return Measured(scale, min_ms, int(((x1 - x0) < min_ms)[spans].sum()), int(shortened.sum()))


def _whiskers(part: pd.DataFrame, phase: str, axes: tuple[str, str]) -> go.Scatter:
    """A thin line under each of the phase's typical bars, from the LOW to the HIGH percentile of its end
    (under the bar, not through it: the forward's and the backward's whiskers on one lane would cross)."""
    x, y = [], []
    for r in part.itertuples():
        x += [r.low_end_ms, r.high_end_ms, None]
        y += [r.device + WHISKER_OFFSET] * 2 + [None]
    return go.Scatter(x=x, y=y, mode="lines+markers", line=dict(color=GUIDE, width=1.2),
                      marker=dict(symbol="line-ns-open", size=7, color=GUIDE), legendgroup=phase, showlegend=False,
                      hoverinfo="skip", xaxis=axes[0], yaxis=axes[1], name=f"{phase} spread")


def _axis(ref: str) -> str:
    """'x2' -> 'xaxis2': the layout key of a trace's axis reference."""
    return f"{ref[0]}axis{ref[1:]}"


def _mark_cuts(fig: go.Figure, scale: TimeScale, axes: tuple[str, str], lanes: int) -> None:
    """Each cut, once, on the time axis: a // where its stretch is drawn, over a (clear) point whose hover
    gives its real length. Nothing across the lanes: a mark on every lane reads as something the GPUs did."""
    x, y = axes
    if not scale.cuts:
        return
    middles = [(float(scale(cut.start)) + float(scale(cut.end))) / 2 for cut in scale.cuts]
    apart = CUT_APART * float(scale.drawn[-1] - scale.drawn[0])
    marked = -float("inf")
    for middle in middles:  # cuts closer than a mark's width share one mark; each keeps its hover
        if middle - marked < apart:
            continue
        marked = middle
        # on a plate of the page's background: it breaks the axis line, as a cut axis is drawn, and reads over the
        # end of a last lane's bar it may sit on
        fig.add_annotation(text=CUT_MARK, x=middle, xref=x, y=0, yref=f"{y} domain", yanchor="middle",
                           showarrow=False, font=dict(size=15), name="cut", bgcolor=THEME_BACKGROUND, borderpad=0)
    lengths = np.array([[c.start, c.end - c.start, c.drawn] for c in scale.cuts])
    fig.add_trace(go.Scatter(
        x=middles, y=[lanes - 0.5] * len(middles), mode="markers", marker=dict(size=16, color="rgba(0,0,0,0)"),
        xaxis=x, yaxis=y, cliponaxis=False, legendgroup="cut", showlegend=False, name="cut", customdata=lengths,
        hovertemplate=(f"{CUT_MARK} cut: from %{{customdata[0]:.3f}} ms, nothing started or ended for "
                       "%{customdata[1]:.3f} ms;<br>drawn %{customdata[2]:.3f} ms long<extra></extra>"),
    ))


def add_typical(fig: go.Figure, typical: pd.DataFrame, extents: pd.DataFrame, vocabulary: Vocabulary,
                axes: tuple[str, str]) -> float:
    """One typical batch: a bar per (lane, phase) from its median start to its median end since the
    batch began, whiskers over the percentiles of its end; returns the median batch's length (ms)."""
    noun, total = vocabulary.lane_noun, int(len(extents))
    length = float((extents["end_ms"] - extents["start_ms"]).median()) if total else 0.0
    for phase in draw_order(vocabulary, set(typical["phase"])):
        part = typical[typical["phase"] == phase]
        customdata = np.column_stack([part["batches"], part["rows"], part["start_ms"], part["end_ms"],
                                      part["low_end_ms"], part["high_end_ms"]])
        what = "idle, no rows" if phase == IDLE else vocabulary.phase(phase).hover
        hover = (f"{noun} %{{y}}: {what}<br>in %{{customdata[0]:,}} of {total:,} batches"
                 + ("" if phase == IDLE else ", median %{customdata[1]:g} rows")
                 + "<br>median start %{customdata[2]:.3f} ms, median end %{customdata[3]:.3f} ms after the batch began"
                 + f"<br>end: {LOW}th percentile %{{customdata[4]:.3f}} ms, {HIGH}th %{{customdata[5]:.3f}} ms")
        fig.add_trace(phase_bars(vocabulary, phase, part["device"].to_numpy(), part["start_ms"].to_numpy(),
                                 (part["end_ms"] - part["start_ms"]).to_numpy(), customdata=customdata, hover=hover,
                                 axes=axes))
        if phase != IDLE and vocabulary.phase(phase).where != HOST:
            fig.add_trace(_whiskers(part, phase, axes))
    # The medians set the scale; a whisker longer than that runs off the edge, one slow batch never sets it.
    right = float(max(typical["end_ms"].max(), length)) * 1.08 if len(typical) else 1.0
    x, y = axes
    fig.add_shape(type="rect", xref=x, yref=f"{y} domain", x0=0, x1=length, y0=0, y1=1, fillcolor=BAND,
                  line=dict(width=0), layer="below", name="typical batch")
    for at, text, anchor in ((0, "batch begins", "left"), (length, "ends (median)", "right")):
        fig.add_shape(type="line", xref=x, yref=f"{y} domain", x0=at, x1=at, y0=0, y1=1,
                      line=dict(color=GUIDE, width=1, dash="solid" if at == 0 else "dash"), layer="below")
        fig.add_annotation(text=text, x=at, xref=x, y=1, yref=f"{y} domain", yanchor="bottom", xanchor=anchor,
                           yshift=2, showarrow=False, font=dict(size=13))
    fig.update_layout({_axis(x): dict(range=[0, right], autorange=False)})
    return length

