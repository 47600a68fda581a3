"""DataParallel's Timeline: as many batches as fit, each lane a device, the host's phases above them."""
from __future__ import annotations

from dataclasses import replace

import plotly.graph_objects as go

from dpviz.trace import Trace
from dpviz.trace.vocabulary import EVERY_LANE, HOST
from dpviz.figures.bounds import DETAIL_BATCHES, MAX_MARKS
from dpviz.analysis.wording import all_of, numbered_range, plural
from dpviz.figures.chart_details import DETAILS
from dpviz.figures.layout import styled
from dpviz.figures.trace_words import backend_note
from dpviz.figures.timeline_look import legend_swatches
from dpviz.figures.timeline_scale import CUT_MARK
from dpviz.figures.timeline_measured import add_measured, add_typical, drawn_host, prepare_timeline
from dpviz.figures.timeline_steps import add_steps, prepare_steps, step_batches
from dpviz.figures.timeline_summary import batch_extents, prepare_typical_batch
from dpviz.figures.timeline_words import (scale_detail, scale_note, steps_note, summary_detail, summary_note, times_detail,
                                          times_note, wrapped)
from dpviz.figures.timeline import lay_out
from dpviz.figures.timeline import panels_for
from dpviz.figures.timeline import name_slots


def dp_window_size(trace: Trace) -> int:
    """How many consecutive batches one DataParallel timeline shows: as many as fit in MAX_MARKS."""
    lanes = max(1, len(trace.lanes))
    # At most the forward and every drawn host phase on each lane (DataParallel: scatter, replicate,
    # forward, gather), and in training each later lane phase once per lane or once per batch.
    marks_per_batch = (1 + len(drawn_host(trace.vocabulary))) * lanes
    for phase in trace.vocabulary.phases if trace.config.train else ():
        if phase.where != HOST and phase.name != "forward":
            marks_per_batch += lanes if phase.where == EVERY_LANE else 1
    return max(1, MAX_MARKS // marks_per_batch)


def timeline_dp_figure(trace: Trace, first_batch: int, last_batch: int, *, show: str, detail: bool | None) -> go.Figure:
    """DataParallel's timeline of batches first_batch..last_batch: its steps in order and as measured."""
    limit = dp_window_size(trace)
    vocabulary, devices = trace.vocabulary, len(trace.lanes)
    total, shown = len(trace.batches), last_batch - first_batch + 1
    detailed = shown <= DETAIL_BATCHES if detail is None else detail
    panels = panels_for(show, devices)
    fig = go.Figure()
    drawn: set[str] = set()
    titles, notes, details = {}, [], []
    training = bool(trace.config.train and trace.spans_of(first_batch, "backward"))
    for panel in panels:
        if panel.name == "steps":
            picked = step_batches(trace, first_batch, last_batch)
            bars, slots = prepare_steps(trace, picked)
            add_steps(fig, bars, slots, vocabulary, panel.axes)
            panels[panels.index(panel)] = replace(panel, axis_px=name_slots(fig, panel.axes[0]))
            drawn |= set(bars["phase"])
            titles["steps"] = "DataParallel's steps in order (not to scale)"
            notes.append(steps_note(picked, first_batch, last_batch))
            continue
        table = prepare_timeline(trace, first_batch, last_batch)
        drawn |= set(table["phase"])
        if detailed:
            measured = add_measured(fig, table, vocabulary, panel.axes)
            cut = bool(measured.scale.cuts)
            titles["measured"] = "Measured: when each step ran"
            notes.append(scale_note(measured))
            details.append(scale_detail(measured))
            # The words and the unit of DDP's timeline, so the two read alike side by side.
            axis = "time since the run began (ms" + (f"; {CUT_MARK}: a quiet moment cut short)" if cut else ")")
        else:
            extents = batch_extents(table)
            add_typical(fig, prepare_typical_batch(table), extents, vocabulary, panel.axes)
            titles["measured"] = f"Measured: a typical batch of these {shown:,}"
            notes.append(summary_note(shown))
            details.append(summary_detail(shown))
            axis = f"ms since its batch began (median of {plural(shown, 'batch')})"
        fig.update_layout({f"xaxis{panel.axes[0][1:]}": dict(title=dict(text=axis, standoff=6), showgrid=True)})
    notes.insert(0, times_note(trace, training))
    details.insert(0, times_detail(trace, training))
    for entry in legend_swatches(vocabulary, sorted(drawn)):
        fig.add_trace(entry)
    if shown == total:
        title = f"Timeline of {all_of(total, 'batch')}, one lane per {vocabulary.lane_noun}"
        subtitle = backend_note(trace)
    else:
        title = f"Timeline of {numbered_range(first_batch, last_batch, total, 'batches')}"
        subtitle = (f"{backend_note(trace)}<br>a window of {plural(shown, 'batch')} (at most {limit:,}, "
                    f"{MAX_MARKS:,} marks); first_batch moves it")
    styled(fig, title, [subtitle])
    text = "<br>".join(wrapped(n) for n in notes if n)
    lay_out(fig, panels, vocabulary, devices, titles, text)
    fig.update_layout(meta={DETAILS: "\n\n".join(d for d in details if d)})
    return fig
