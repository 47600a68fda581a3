"""Timeline of a DistributedDataParallel run: one lane per rank (a process), each step's work in measured time.

Each lane has two rows. The upper, thick row is what the rank's own thread does: DDP()'s broadcast of
rank 0's parameters (once, before step 0), then per step load, the bucket rebuild (once, in step 1), the
buffers' broadcast, forward, loss, backward and the optimizer step. The thin row under it holds the gradient
buckets' all-reduces, which gloo or NCCL run beside the backward: a bucket's all-reduce starts as soon
as its gradients are ready, while backward still computes the rest, so the two rows overlap in time.
Buckets of one step get sub-rows of their own (up to BUCKET_ROWS, then they share), so one bucket's
bar never hides another's; the hover names the bucket's parameters and bytes from the trace's facts.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dpviz.echo import plotly_text
from dpviz.engines.ddp.read.summary import OVERLAP_LABEL
from dpviz.engines.ddp.read.tables import backwards, bucket_layout, computing_overlap, epochs_of, under_no_sync
from dpviz.engines.ddp.vocabulary import BUCKET
from dpviz.trace import Trace
from dpviz.trace.vocabulary import Vocabulary
from dpviz.analysis.wording import all_of, counted, human_bytes, numbered, numbered_range, plural
from dpviz.figures.bounds import MAX_MARKS
from dpviz.figures.colors import GUIDE, MISSING, OUTLINE, device_color, device_pattern, with_alpha
from dpviz.figures.split import RAISED
from dpviz.trace.legend import kind_color
from dpviz.figures.chart_details import DETAILS
from dpviz.figures.layout import styled, title_block_px
from dpviz.figures.legends import legend_entries
from dpviz.figures.sizes import GAP_PX, MARGIN, NARROWEST_PX
from dpviz.figures.text_fit import text_px
from dpviz.figures.trace_words import NAME_LIMIT
from dpviz.engines.ddp.read.words import ddp_note

COLUMNS = ["device", "phase", "batch", "start_ms", "end_ms", "rows", "first_row", "group", "detail"]
BUCKET_ROWS = 4  # sub-rows for the buckets of one step; more buckets share them (bucket k on row k mod 4)
COMPUTE_Y, COMPUTE_H = -0.12, 0.56  # the rank's own thread: the upper part of its lane
REDUCE_TOP, REDUCE_H = 0.18, 0.24  # the all-reduce row: the lower part of the lane
PARAMS_SHOWN = 6  # parameter names a hover lists before "and N more"
MARKS_PX = 20  # room above the lanes for a row of the steps' names
MARK_SIZE, MARK_ROWS, MARK_GAP_PX = 12, 2, 6  # the steps' names: their size, up to two rows, the room between two
# The steps' names must not meet on the narrowest chart, in its usual type and on a projector (presentation()'s
# 1.35 × larger type and margins): the plot's width and the type size of the harder of the two.
PRESENTING = 1.35
MAX_STEP_MARKS = 24  # steps named above the lanes; a wider window would crowd them
MIN_SHARE = 1 / 200  # the shortest drawn span, as a share of the window's time (as the DataParallel timeline)
LEGEND_ROW_PX, LANE_BASE_PX, LANE_PX, BOTTOM_PX = 28, 100, 64, 70
LEGEND_COLUMNS = 2  # on the narrowest chart (468 px) a half holds "waiting for all-reduce" and its swatch
WAIT = "wait"  # not a recorded phase: the tail of a backward spent waiting for the all-reduces
WAIT_LABEL = "waiting for all-reduce"
LEGEND_GREY = "#8A8A8A"  # legend swatch of a phase drawn in each rank's own colour


def window_size(trace: Trace) -> int:
    """How many consecutive steps one timeline shows: as many as fit in MAX_MARKS (a bar per span)."""
    counts: dict[int, int] = {}
    for span in trace.spans:
        counts[span.batch] = counts.get(span.batch, 0) + 1
    per_step = max(counts.values(), default=0) + len(trace.lanes)  # and each rank's wait for its all-reduces
    return max(1, MAX_MARKS // max(1, per_step))


def _listed(names: list[str]) -> str:
    shown = ", ".join(plotly_text(n, NAME_LIMIT) for n in names[:PARAMS_SHOWN])
    more = len(names) - PARAMS_SHOWN
    return shown + (f" and {more:,} more" if more > 0 else "")


def bucket_text(trace: Trace, step: int, index: int | None) -> str:
    """'bucket 1 (torch's index; 2 in all): …', from the layout in effect in `step` (plotly HTML). Buckets keep the
    index DDP's reducer gives them, from 0, as What happened names them: no "of N" beside a number from 0."""
    layout = bucket_layout(trace, step)
    bucket = next((b for b in layout if b.get("index") == index), None)
    if bucket is None:
        return f"bucket {index}"
    params = list(bucket.get("params") or [])
    return (f"bucket {index} (torch's index; {len(layout)} in all): {plural(len(params), 'parameter')}, "
            f"{human_bytes(bucket.get('bytes', 0))}"
            f"<br>{_listed(params)}")


def prepare_timeline_ddp(trace: Trace, first_batch: int, last_batch: int) -> pd.DataFrame:
    """One row per span of steps first_batch..last_batch: rank, phase, step, times in ms, rows, group (-1: none) and
    the words of its hover (an all-reduce names its bucket, a forward its rows)."""
    vocabulary = trace.vocabulary
    records = []
    group = vocabulary.group_noun  # what a grouped span names: DDP's gradient bucket is told from its layout instead
    groups = 1 + max((s.group for s in trace.spans if s.group is not None), default=0)
    for b in range(first_batch, last_batch + 1):
        for span in trace.spans_of(b):
            if span.lane is None or span.phase not in vocabulary.order:  # a file may name a phase DDP lacks
                continue
            phase = vocabulary.phase(span.phase)
            if not phase.drawn:
                continue
            detail = f"{vocabulary.lane_name(span.lane)}: {phase.hover}"
            if span.phase == "forward":
                detail += f" {span.row_offset}-{span.row_offset + span.rows - 1} of the step ({plural(span.rows, 'row')})" \
                    if span.rows else " none (no rows)"
            if phase.grouped and group != BUCKET:  # e.g. FSDP's sharded module; the thread says what ran it
                detail += f", {numbered(span.group, groups, group)}" + (f" ({span.thread})" if span.thread else "")
            elif phase.grouped:
                detail = f"{vocabulary.lane_name(span.lane)}: all-reduce of {bucket_text(trace, b, span.group)}"
            group_index = -1 if span.group is None else span.group
            records.append((span.lane, span.phase, b, span.start * 1e3, span.end * 1e3, span.rows, span.row_offset,
                            group_index, detail))
        records += _waits(trace, b)
    return pd.DataFrame.from_records(records, columns=COLUMNS)


def _waits(trace: Trace, step: int) -> list[tuple]:
    """Per rank, the end of its backward after its last bucket's all-reduce began (tables_ddp.backwards):
    autograd has made every gradient by then (a bucket launches once its gradients are ready, in index
    order), and backward only returns when every all-reduce has finished (the reducer's finalize_backward
    waits on them). computing_overlap counts the all-reduces against the rest of the bar, the same spans."""
    out = []
    for back in backwards(trace, range(step, step + 1)):
        if back.computed_until < back.end:
            detail = (f"{trace.vocabulary.lane_name(back.rank)}: backward after its last bucket's all-reduce began: "
                      "gradients are made, it waits for the all-reduces to finish")
            out.append((back.rank, WAIT, step, back.computed_until * 1e3, back.end * 1e3, 0, 0, -1, detail))
    return out


def sub_rows(table: pd.DataFrame, min_ms: float = 0.0) -> pd.Series:
    """The sub-row of the collectives' row each collective sits on: on each rank, in the order they started, the first
    sub-row whose last collective had ended (at most BUCKET_ROWS, then they share, in turn). Collectives that follow one
    another (FSDP's gathers, tensor parallelism's all-reduces) share one sub-row as tall as the row; only those that run
    at once (DDP's buckets) get sub-rows of their own, so none hides another and none is drawn thinner than it must.
    A span ends where its bar does: drawn at least `min_ms` long."""
    slots = pd.Series(-1, index=table.index, dtype="int64")
    collectives = table[table["group"] >= 0].sort_values(["device", "start_ms"], kind="stable")
    for _, spans in collectives.groupby("device"):
        ends: list[float] = []
        for index, start, end in zip(spans.index, spans["start_ms"], spans["end_ms"]):
            free = next((k for k, last in enumerate(ends) if last <= start), None)
            if free is None and len(ends) < BUCKET_ROWS:
                free = len(ends)
                ends.append(0.0)
            elif free is None:  # every sub-row busy: the one free soonest
                free = int(np.argmin(ends))
            ends[free] = max(end, start + min_ms)
            slots[index] = free
    return slots


def _y(part: pd.DataFrame, bucket_rows: int) -> tuple[np.ndarray, float]:
    """Where bars of `part` sit: the compute row, or the collectives' row's sub-row of each (its "slot")."""
    lanes = part["device"].to_numpy(dtype=float)
    if part.empty or part["group"].iloc[0] < 0:
        return lanes + COMPUTE_Y, COMPUTE_H
    height = REDUCE_H / bucket_rows
    return lanes + REDUCE_TOP + height * (part["slot"].to_numpy() + 0.5), height * 0.85


def _bar(part: pd.DataFrame, *, name: str, color, pattern, min_ms: float, bucket_rows: int) -> go.Bar:
    duration = (part["end_ms"] - part["start_ms"]).to_numpy()
    y, width = _y(part, bucket_rows)
    customdata = np.column_stack([part["detail"], part["batch"], part["start_ms"], duration, part["batch"] + 1])
    return go.Bar(
        orientation="h", y=y, x=np.maximum(duration, min_ms), base=part["start_ms"].to_numpy(), width=width,
        name=name, legendgroup=name,
        marker=dict(color=color, line=dict(color=OUTLINE, width=0.3), pattern=dict(fillmode="overlay", shape=pattern, fgcolor="white")),
        customdata=customdata,
        hovertemplate="%{customdata[0]}<br>step %{customdata[4]:,}<br>start %{customdata[2]:.3f} ms, "
                      "took %{customdata[3]:.3f} ms<extra></extra>",
    )


def _mark_px_per_ms(table: pd.DataFrame, x_range: tuple[float, float] | None = None) -> tuple[float, float]:
    """(pixels per ms, type size) of the steps' names on the narrowest chart, opened on `x_range` (ms) when given, in
    whichever of the usual and the presenting look gives a name the most milliseconds (larger type on a narrower plot)."""
    span_ms = float(table["end_ms"].max() - table["start_ms"].min()) if len(table) else 0.0
    if x_range is not None:
        span_ms = x_range[1] - x_range[0]
    looks = [(NARROWEST_PX - (MARGIN["l"] + MARGIN["r"]) * scale, MARK_SIZE * scale) for scale in (1.0, PRESENTING)]
    width, size = min(looks, key=lambda look: look[0] / look[1])
    return (width / span_ms if span_ms > 0 else float("inf")), size


def _placed(times: list[float], labels: list[str], px_per_ms: float, size: float) -> list[int | None]:
    """The row of each name (0, or 1 over it), the first where it starts after the row's last name ends on
    the narrowest chart; None where it meets a name in every row."""
    ends = [-float("inf")] * MARK_ROWS  # where each row's last name ends, in pixels
    rows: list[int | None] = []
    for t, label in zip(times, labels):
        at = t * px_per_ms
        row = next((r for r in range(MARK_ROWS) if at >= ends[r] + MARK_GAP_PX), None)
        if row is not None:
            ends[row] = at + text_px(label, size)
        rows.append(row)
    return rows


def step_marks(trace: Trace, table: pd.DataFrame,
               x_range: tuple[float, float] | None = None) -> list[tuple[float, str, int]]:
    """(time in ms, label, row) where each step of the table begins on its earliest rank, counted from 1:
    'step 3', or 'step 3: no_sync' for a training step that all-reduced nothing. A name goes in the first
    row where it ends before the next begins on the narrowest chart (row 1 over row 0). When some would
    meet in both rows, the steps after the first are named by their number alone ('step 1', '2', '3', as
    the measured DataParallel timeline names its batches); one that still meets is left out (its dotted
    line and the hovers still mark it). None past MAX_STEP_MARKS steps. `x_range`: the ms the chart opens on."""
    steps = table[table["phase"] != "broadcast"].groupby("batch")["start_ms"].min()
    if len(steps) > MAX_STEP_MARKS:
        return []
    reduced = set(table.loc[table["group"] >= 0, "batch"])
    trained = set(table.loc[table["phase"] == "backward", "batch"])
    reduces = bool(trace.vocabulary.names_where_grouped)  # an engine with collectives per bucket (not a pipeline)
    words = lambda b: (": no_sync" if under_no_sync(trace, b) else ": no all-reduce") \
        if reduces and b in trained and b not in reduced else ""
    px_per_ms, size = _mark_px_per_ms(table, x_range)
    if x_range is not None:
        # The window the chart opens on names the steps in it: the one still under way at its left edge (step 1, its
        # first load left of the window; or the last step, when the chart opens on it) at that edge, as plotly draws no
        # annotation outside its axis's range, and those that begin in it. The steps wholly before or after it
        # are not named on it: pinned to its edge, they read as the step shown.
        ends = table.groupby("batch")["end_ms"].max()
        started = steps[(steps <= x_range[0]) & (ends.reindex(steps.index) > x_range[0])]  # still under way there
        steps = steps[((steps > x_range[0]) & (steps <= x_range[1])) | steps.index.isin(started.index[-1:])]
    times = [max(float(t), x_range[0]) if x_range is not None else float(t) for t in steps.to_numpy()]
    labels = [f"step {counted(b)}{words(b)}" for b in steps.index]
    rows = _placed(times, labels, px_per_ms, size)
    if None in rows:
        labels = [label if i == 0 else f"{counted(b)}{words(b)}" for i, (b, label) in enumerate(zip(steps.index, labels))]
        rows = _placed(times, labels, px_per_ms, size)
    return [(t, label, row) for t, label, row in zip(times, labels, rows) if row is not None]


def plot_timeline_ddp(table: pd.DataFrame, *, vocabulary: Vocabulary, ranks: int, title: str,
                      notes: list[str], marks: list[tuple[float, str, int]] = (),
                      x_range: tuple[float, float] | None = None, failed: int | None = None) -> go.Figure:
    """Per rank a thick row (its own thread's phases, in pipeline order) over a thin all-reduce row; opened on
    `x_range` (ms) when given, the shortest bar a share of that."""
    fig = go.Figure()
    span_ms = float(table["end_ms"].max() - table["start_ms"].min()) if len(table) else 0.0
    if x_range is not None:
        span_ms = x_range[1] - x_range[0]
    min_ms = MIN_SHARE * span_ms
    table = table.assign(slot=sub_rows(table, min_ms))
    bucket_rows = max(1, int(table["slot"].max()) + 1)
    for phase in vocabulary.phases:
        part = table[table["phase"] == phase.name]
        if part.empty:
            continue
        if x_range is not None and ((part["end_ms"] <= x_range[0]) | (part["start_ms"] >= x_range[1])).all():
            # drawn, but only outside the window the chart opens on (set-up before step 1): its legend entry says so,
            # where it named a colour a class looks for in vain
            side = "left" if (part["end_ms"] <= x_range[0]).all() else "right"
            phase = dataclasses.replace(phase, label=f"{phase.label}<br>({side}\u00a0of\u00a0view)")  # one line
        if phase.color == "lane":  # each rank's colour; the legend's swatch is grey, as it stands for every rank
            color = [device_color(d) for d in part["device"]]
            pattern = phase.hatch or [device_pattern(d) for d in part["device"]]
            fig.add_trace(_bar(part, name=phase.label, color=color, pattern=pattern, min_ms=min_ms,
                               bucket_rows=bucket_rows).update(showlegend=False))
            fig.add_trace(go.Bar(x=[None], y=[None], name=phase.label, legendgroup=phase.label, orientation="h",
                                 marker=dict(color=LEGEND_GREY, line=dict(color=OUTLINE, width=0.3),
                                             pattern=dict(fillmode="overlay", shape=phase.hatch, fgcolor="white"))))
        else:
            fig.add_trace(_bar(part, name=phase.label, color=phase.color, pattern=phase.hatch, min_ms=min_ms,
                               bucket_rows=bucket_rows))
    waits = table[table["phase"] == WAIT]
    if len(waits):  # over the backward's tail: paler, so the time it computed stands out from the time it waited
        fig.add_trace(_bar(waits, name=WAIT_LABEL, color=with_alpha("#FFFFFF", 0.6), pattern="", min_ms=0.0,
                           bucket_rows=bucket_rows))
    if failed is not None:
        _failed_marks(fig, table, failed)
    if "step_broadcast" in vocabulary.words:
        _broadcast_marks(fig, table, vocabulary.words["step_broadcast"])
    fig.update_layout(barmode="overlay", bargap=0.1, dragmode="zoom", hovermode="closest")
    fig.update_yaxes(title_text=vocabulary.lane_noun, autorange=False, range=[ranks - 0.5, -0.5], tickmode="array",
                     tickvals=list(range(ranks)), ticktext=[vocabulary.lane_name(r) for r in range(ranks)],
                     showgrid=False, zeroline=False)
    for t, label, row in marks:  # where each step begins, named above the lanes (a second row over the first)
        fig.add_vline(x=t, line=dict(color=GUIDE, width=1, dash="dot"))
        fig.add_annotation(x=t, y=-0.5, yref="y", text=label, showarrow=False, xanchor="left", yanchor="bottom",
                           yshift=row * MARKS_PX, font=dict(size=MARK_SIZE), name="step mark")  # the theme's ink
    for r in range(1, ranks):  # a rule between lanes: which all-reduce row belongs to which rank
        fig.add_hline(y=r - 0.5, line=dict(color=GUIDE, width=1))
    fig.update_xaxes(title_text="time since the run began (ms; drag to zoom)")
    if x_range is not None:
        fig.update_xaxes(range=list(x_range))
    rows = max(1, -(-len(legend_entries(fig)) // LEGEND_COLUMNS))  # the entries the legend shows, not every trace
    plot_px = LANE_BASE_PX + LANE_PX * ranks
    marks_px = MARKS_PX * (1 + max((row for _, _, row in marks), default=0)) if marks else 0
    # The legend in columns over the lanes, the steps' names between it and the lanes.
    fig.update_layout(legend=dict(orientation="h", x=0, xanchor="left", y=1 + (6 + marks_px) / plot_px, yanchor="bottom",
                                  entrywidth=1 / LEGEND_COLUMNS, entrywidthmode="fraction", traceorder="normal"))
    styled(fig, title, notes)
    top = title_block_px(fig) + GAP_PX + rows * LEGEND_ROW_PX + marks_px  # the title block as styled() wrapped it
    fig.update_layout(height=top + plot_px + BOTTOM_PX, margin=dict(t=top, b=BOTTOM_PX))
    return fig


def overlap_words(trace: Trace, first_batch: int, last_batch: int) -> str:
    """What the all-reduce share measures, over the drawn steps, from the spans the bars are drawn from."""
    overlap, total = computing_overlap(trace, range(first_batch, last_batch + 1))
    share = f" ({overlap / total:.0%})" if total else ""
    return (f"{OVERLAP_LABEL}: {overlap * 1e3:,.2f} of {total * 1e3:,.2f} ms{share}, summed over the {trace.vocabulary.lane_noun}s; "
            "a backward's pale end: its gradients are made, it waits for the all-reduce")


def timeline_ddp_figure(trace: Trace, first_batch: int, last_batch: int, *, show: str = "both",
                        detail: bool | None = None) -> go.Figure:
    """The timeline of steps first_batch..last_batch of a DDP trace, with its words: one panel, every step as
    measured (`show` and `detail` choose among DataParallel's panels; DDP has the one)."""
    table = prepare_timeline_ddp(trace, first_batch, last_batch)
    total, shown = len(trace.batches), last_batch - first_batch + 1
    noun = trace.vocabulary.lane_noun
    if shown == total:
        title = f"Timeline of {all_of(total, 'step')}, one lane per {noun} (a process each)"
    else:
        title = f"Timeline of {numbered_range(first_batch, last_batch, total, 'steps')} (a window of {plural(shown, 'step')})"
    lines = []
    if (table["group"] >= 0).any():
        lines.append(trace.vocabulary.words.get("thin_row", "thin row under each {noun}: each gradient bucket's "
                                                "all-reduce, running beside backward").format(noun=noun))
        gloo = trace.vocabulary.words.get("gloo_reduce_scatter")
        if gloo and trace.backend == "cpu" and (table["phase"] == "reduce_scatter").any():
            lines.append(gloo.format(noun=noun))
        if kept_whole(trace, table):
            lines.append(trace.vocabulary.words["no_backward_gather"])
        if "thin_row" not in trace.vocabulary.words:  # the share of backward's compute the bucket all-reduces ran in
            lines.append(overlap_words(trace, first_batch, last_batch))
    elif trace.vocabulary.names_where_grouped:
        lines.append("no all-reduce in these steps" + (": forward only" if not trace.config.train else
                                                       ": under no_sync" if trace.config.accumulate > 1 else ""))
    details = []  # why the times look so and how they were drawn: under the chart, behind an expander
    if trace.backend == "cpu" and len(trace.lanes) > 1:
        details.append(f"{plural(len(trace.lanes), 'process').capitalize()} share the machine's CPU cores: measured "
                       "times include waiting for the others to be scheduled.")
    x_range = _zoomed(trace, table)
    if x_range is not None:
        step = int(table.loc[(table["group"] >= 0), "batch"].max())
        lines.append(trace.vocabulary.words["timeline_zoom"].format(step=counted(step)))
        if shown == total:  # the title says which step the chart shows: Presenting moves the notes under the plot
            lesson = zoomed_lesson(trace, table, step)
            title = (f"Timeline opened on step {counted(step)} of {total}"
                     + (f": {lesson}" if lesson else f", one lane per {noun} (a process each)"))
    elif (opened := on_the_steps(trace, table)) is not None:
        x_range, words = opened
        lines.append(words)
    span_ms = float(table["end_ms"].max() - table["start_ms"].min()) if len(table) else 0.0
    if x_range is not None:
        span_ms = x_range[1] - x_range[0]
    if len(table) and ((table["end_ms"] - table["start_ms"]) < MIN_SHARE * span_ms).any():
        details.append(f"Spans shorter than 1/{round(1 / MIN_SHARE)} of the window are drawn that long; the hover "
                       "gives the measured time.")
    if shown < total:
        lines.append(f"at most {window_size(trace):,} steps per window ({MAX_MARKS:,} marks)")
    if trace.failure is not None and first_batch <= trace.failure.batch <= last_batch:
        lines.append(f"step {counted(trace.failure.batch)} failed: {plotly_text(trace.failure.headline, 80)}")
    if epochs_of(trace) > 1:
        lines.append(f"{plural(epochs_of(trace), 'epoch')}")
    notes = ["<br>".join([ddp_note(trace)] + lines)]  # a line each: a narrow page cuts a long one
    fig = plot_timeline_ddp(table, vocabulary=trace.vocabulary, ranks=len(trace.lanes), title=title, notes=notes,
                            marks=step_marks(trace, table, x_range), x_range=x_range,
                            failed=trace.failure.batch if trace.failure is not None else None)
    return fig.update_layout(meta={DETAILS: "\n\n".join(details)}) if details else fig


def zoomed_lesson(trace: Trace, table: pd.DataFrame, step: int) -> str | None:
    """What the step a timeline opens on shows, for its title (Presenting moves the notes under the fold): FSDP's
    backward that gathers nothing (reshard_after_forward off), or tensor parallelism's all-reduces in each pass, as
    counted on the first rank; None where the notes say it all."""
    if kept_whole(trace, table):
        return trace.vocabulary.words["no_backward_gather"].split(":")[0]  # "no all-gather in backward"
    first = table[(table["batch"] == step) & (table["device"] == table["device"].min())]
    forward = int((first["phase"] == "allreduce_forward").sum())
    backward = int((first["phase"] == "allreduce_backward").sum())
    if not forward and not backward:
        return None
    on_each = f"on each {trace.vocabulary.lane_noun}"
    in_forward = f"{plural(forward, 'all-reduce')} in forward"
    return f"{in_forward}, {backward:,} in backward {on_each}" if backward else f"{in_forward} {on_each}"


def kept_whole(trace: Trace, table: pd.DataFrame) -> bool:
    """Whether a training run's backward gathered nothing in the drawn steps where its engine gathers there when it
    reshards (FSDP with reshard_after_forward off): said in the notes, and in the title of the step it opens on."""
    return ("no_backward_gather" in trace.vocabulary.words and trace.config.train
            and "gather_backward" in trace.vocabulary.order and not (table["phase"] == "gather_backward").any())


FAILED_NAME = RAISED  # as DataParallel's split marks the replica that raised


def _failed_marks(fig: go.Figure, table: pd.DataFrame, step: int) -> None:
    """A cross where each rank's work in the failed step stopped (the end of its last span there): the step a class
    is told failed, marked on the lanes, its error in the notes above."""
    ends = table[table["batch"] == step].groupby("device")["end_ms"].max()
    if ends.empty:
        return
    fig.add_trace(go.Scatter(
        x=ends.to_numpy(), y=ends.index.to_numpy(dtype=float) + COMPUTE_Y, mode="markers+text", name=FAILED_NAME,
        text=["✗"] * len(ends), textposition="top center", textfont=dict(size=16),  # over it: a mark at the edge stays in
        marker=dict(symbol="line-ns", size=26, line=dict(width=3, color=MISSING)),
        hovertemplate=f"step {counted(step)}: the last this rank ran before the run failed<extra></extra>",
    ))


def _broadcast_marks(fig: go.Figure, table: pd.DataFrame, name: str) -> None:
    """A diamond in the broadcast's colour where each optimizer step ends: an engine whose step ends by broadcasting
    (ZeRO-1: each owner's updated parameters) runs it inside the step's span, so the mark says where it is."""
    steps = table[table["phase"] == "step"]
    if steps.empty:
        return
    fig.add_trace(go.Scatter(
        x=steps["end_ms"].to_numpy(), y=steps["device"].to_numpy(dtype=float) + COMPUTE_Y, mode="markers", name=name,
        marker=dict(symbol="diamond", size=12, color=kind_color("broadcast"), line=dict(width=1, color=OUTLINE)),
        customdata=steps["batch"].to_numpy() + 1,
        hovertemplate="step %{customdata}: the optimizer step ends with the broadcasts of the updated shards<extra></extra>",
    ))


ZOOM_PAD = 0.03  # room either side of a zoomed step, as a share of it


def _zoomed(trace: Trace, table: pd.DataFrame) -> tuple[float, float] | None:
    """Where a timeline whose engine asks for it (its words name a "timeline_zoom") opens: the last drawn step's
    work after its load, from its first rank's start to its last rank's end (ms). Its groups' collectives take
    a few ms each; over a whole window they would be hairlines. None when the engine does not ask, or no step
    has a group's spans."""
    if "timeline_zoom" not in trace.vocabulary.words or not (table["group"] >= 0).any():
        return None
    step = int(table.loc[table["group"] >= 0, "batch"].max())
    work = table[(table["batch"] == step) & (table["phase"] != "load")]
    low, high = float(work["start_ms"].min()), float(work["end_ms"].max())
    pad = ZOOM_PAD * (high - low)
    return low - pad, high + pad


# Before step 1 every rank sets up once (DDP()'s broadcast, fully_shard, PipelineStage()) and waits for its first rows:
# a few ms, or a second on a busy machine, where a forward-only step takes a tenth of a ms. Past this share of the
# window the timeline opens on the steps, and says what it left out.
SETUP_SHARE = 1 / 4


def setup_phases(vocabulary: Vocabulary) -> set[str]:
    """The phases each rank runs once before it loads its first rows: those before "load" in the vocabulary's order."""
    order = vocabulary.order
    return {name for name, at in order.items() if at < order["load"]} if "load" in order else set()


def first_loads(table: pd.DataFrame) -> pd.Series:
    """Each rank's first load: the wait for its first rows (the DataLoader's iterator made, its first batch read),
    set-up that a busy machine can stretch to most of the run, not a step's own load."""
    loads = table[table["phase"] == "load"]
    first = loads.index.isin(loads.sort_values("start_ms", kind="stable").groupby("device").head(1).index)
    return pd.Series(False, index=table.index) | pd.Series(first, index=loads.index).reindex(table.index, fill_value=False)


def on_the_steps(trace: Trace, table: pd.DataFrame) -> tuple[tuple[float, float], str] | None:
    """Where a timeline opens when what ran before step 1 would take more than SETUP_SHARE of its width: from the
    steps' first span to the last span's end (ms), and the note that says what is left of it; None otherwise."""
    setup = table["phase"].isin(setup_phases(trace.vocabulary)) | first_loads(table)
    if not setup.any() or setup.all():
        return None
    begin, end = float(table["start_ms"].min()), float(table["end_ms"].max())
    steps = float(table.loc[~setup, "start_ms"].min())
    if steps - begin <= SETUP_SHARE * (end - begin):
        return None
    once = setup & ~first_loads(table)
    labels = ", ".join([trace.vocabulary.phase(name).label for name in dict.fromkeys(table.loc[once, "phase"])]
                       + (["each rank's first load"] if first_loads(table).any() else []))
    pad = ZOOM_PAD * (end - steps)
    return (steps - pad, end + pad), (f"opened on the steps: the {steps - begin:,.1f} ms before step 1 ({labels}) "
                                      "are left of it (double-click: the whole run)")
