"""Split per step of a DistributedDataParallel run: the rows each rank loaded, padding repeats marked.

DDP does not split a batch: every rank's own DataLoader hands it ceil(batch_size / ranks) rows of its
DistributedSampler shard, so every step stacks one bar segment per rank. DistributedSampler pads its list
by repeating its first rows until it divides evenly among the ranks; those rows are loaded twice in an
epoch, and are drawn hatched (and counted in the hover and the grid). Past MAX_MARKS, consecutive steps
with the same rows share one bar, as in the DataParallel view.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dpviz.echo import plotly_text
from dpviz.analysis.wording import counted, device_list, plural
from dpviz.engines.ddp.read.tables import epochs_of, rank_rows, repeated_rows
from dpviz.trace import Trace
from dpviz.figures.bounds import MAX_MARKS, split_runs
from dpviz.figures.colors import IDLE_GREY, OUTLINE, device_color, device_colorscale, device_pattern, text_color_on
from dpviz.engines.ddp.read.words import ddp_note
from dpviz.figures.layout import styled
from dpviz.figures.trace_words import rows_text

COLUMNS = ["bar", "first_batch", "last_batch", "label", "device", "rows", "first_row", "repeated"]
REPEAT_PATTERN = "x"
TEXT_CELLS = 400


def prepare_split_ddp(trace: Trace) -> pd.DataFrame:
    """One row per (bar, rank): the rows the rank loaded in the bar's step(s) and how many repeat a row
    already loaded that epoch. A bar is one step, or past MAX_MARKS a run of steps with the same rows."""
    repeats = repeated_rows(trace)
    ranks = [lane.id for lane in trace.lanes]
    per_step = []
    for batch in trace.batches:
        forwards = rank_rows(trace, batch.index)
        per_step.append(tuple((forwards[r].rows if r in forwards else 0, sum(repeats[batch.index].get(r, [])))
                              for r in ranks))
    per_bar = 3 * max(1, len(ranks))  # two segments and a grid cell per rank
    if len(per_step) * per_bar <= MAX_MARKS:
        runs = [(i, i) for i in range(len(per_step))]
    else:
        runs = split_runs(per_step)[: MAX_MARKS // per_bar]
    records = []
    for bar, (first, last) in enumerate(runs):
        label = counted(first) if first == last else f"{counted(first)}-{counted(last)}<br>({last - first + 1:,} steps)"
        forwards = rank_rows(trace, first)
        for k, rank in enumerate(ranks):
            rows, repeated = per_step[first][k]
            offset = forwards[rank].row_offset if rank in forwards else -1
            records.append((bar, first, last, label, rank, rows, offset, repeated))
    return pd.DataFrame.from_records(records, columns=COLUMNS)


def _segment(part: pd.DataFrame, rank: int, name: str, values: pd.Series, repeat: bool, show_text: bool,
             showlegend: bool = True) -> go.Bar:
    color = device_color(rank)
    what = "rows repeated from earlier in the epoch (DistributedSampler's padding)" if repeat else "rows loaded"
    hover = [f"step {counted(a)}" if a == b else f"steps {counted(a)}-{counted(b)}" for a, b in zip(part["first_batch"], part["last_batch"])]
    where = [rows_text(f, r) for f, r in zip(part["first_row"], part["rows"])]
    return go.Bar(
        x=part["label"], y=values, name=name, legendgroup=name, showlegend=showlegend,
        marker=dict(color=color, line=dict(color=OUTLINE, width=0.6),
                    pattern=dict(fillmode="overlay", shape=REPEAT_PATTERN if repeat else device_pattern(rank), fgcolor="white", solidity=0.45)),
        text=values if show_text else None, textposition="inside", insidetextanchor="middle", textangle=0,
        insidetextfont=dict(color=text_color_on(color)),
        customdata=np.column_stack([hover, where]) if len(part) else None,
        hovertemplate=f"{name}<br>%{{customdata[0]}}: %{{y}} {what}<br>the step's %{{customdata[1]}}<extra></extra>",
    )


def left_alone(trace: Trace, table: pd.DataFrame) -> tuple[str, list[int], list[int]] | None:
    """The step the run failed in, where some ranks loaded rows and the others had none left (rows split unevenly):
    (its bar's label, the ranks that loaded, the idle ones); None for any other run. A rank alone in a step calls
    an all-reduce no other rank joins, and waits for them until the process group's timeout."""
    failure = trace.failure
    if failure is None or failure.batch is None or not len(table):
        return None
    step = table[(table["first_batch"] == failure.batch) & (table["last_batch"] == failure.batch)]
    loaded = sorted(step.loc[step["rows"] > 0, "device"].tolist())
    idle = sorted(step.loc[step["rows"] == 0, "device"].tolist())
    return (step["label"].iloc[0], loaded, idle) if loaded and idle else None


def plot_split_ddp(table: pd.DataFrame, *, lane_names: list[str], title: str, notes: list[str], x_title: str) -> go.Figure:
    """Per step a stack of each rank's rows (repeats hatched) over a rank x step grid of rows loaded."""
    ranks = len(lane_names)
    grid_px = 20 * ranks  # as DataParallel's split: the chart and its title on a projector's first screen
    bars_px = max(180, 360 - grid_px)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[bars_px, grid_px], vertical_spacing=0.05)
    labels = table.drop_duplicates("bar")["label"].tolist()
    show_text = len(labels) * ranks <= TEXT_CELLS
    for rank in range(ranks):
        part = table[table["device"] == rank]
        fresh = part["rows"] - part["repeated"]
        fig.add_trace(_segment(part, rank, lane_names[rank], fresh, False, show_text), row=1, col=1)
        if part["repeated"].any():
            fig.add_trace(_segment(part, rank, lane_names[rank], part["repeated"], True, show_text, showlegend=False),
                          row=1, col=1)
    if table["repeated"].any():  # legend entry only: the hatch means "repeated", whatever the rank
        fig.add_trace(go.Bar(x=[None], y=[None], name="hatched: a row loaded again (padding)",
                             marker=dict(color="#8A8A8A", line=dict(color=OUTLINE, width=0.6),
                                         pattern=dict(fillmode="overlay", shape=REPEAT_PATTERN, fgcolor="white", solidity=0.45))), row=1, col=1)
    grid = table.pivot(index="device", columns="bar", values="device").to_numpy(dtype=float, copy=True)
    rows = table.pivot(index="device", columns="bar", values="rows").to_numpy()
    repeated = table.pivot(index="device", columns="bar", values="repeated").to_numpy()
    grid[rows == 0] = -1
    text = np.where(rows == 0, "idle", np.where(repeated > 0, rows.astype(str) + "*", rows.astype(str)))
    fig.add_trace(go.Heatmap(
        z=grid, x=labels, y=lane_names, colorscale=device_colorscale(ranks), zmin=-1.5, zmax=ranks - 0.5,
        showscale=False, xgap=2, ygap=2,
        customdata=np.char.add(rows.astype(str), np.where(repeated > 0, np.char.add(" rows, repeated: ", repeated.astype(str)), " rows")),
        hovertemplate="%{y}, step %{x}: %{customdata}<extra></extra>",
    ), row=2, col=1)
    if show_text:  # a text trace: a heatmap's text has one colour, and each rank's colour needs its own
        cells = [(x, r) for r in range(ranks) for x in range(len(labels))]
        fig.add_trace(go.Scatter(
            x=[labels[x] for x, _ in cells], y=[lane_names[r] for _, r in cells], mode="text",
            text=[text[r, x] for x, r in cells], hoverinfo="skip", showlegend=False,
            textfont=dict(size=12, color=[text_color_on(device_color(r) if rows[r, x] else IDLE_GREY) for x, r in cells]),
        ), row=2, col=1)
    fig.update_layout(barmode="stack", bargap=0.25, uniformtext=dict(minsize=11, mode="hide"))
    fig.update_xaxes(type="category", row=1, col=1)
    fig.update_xaxes(type="category", title_text=x_title, row=2, col=1)
    # Rows are whole: a few of them get a tick each, not 0.5 steps
    fig.update_yaxes(title_text="rows the ranks loaded", row=1, col=1,
                     **(dict(dtick=1) if table.groupby("bar")["rows"].sum().max() <= 8 else {}))
    fig.update_yaxes(autorange="reversed", tickmode="linear", row=2, col=1)
    return styled(fig, title, notes, height=bars_px + grid_px + 200)  # styled() wraps the notes to the chart


def split_ddp_figure(trace: Trace) -> go.Figure:
    """Rows per rank in every step of a DDP trace, the padding's repeated rows hatched."""
    table = prepare_split_ddp(trace)
    total = len(trace.batches)
    bars = int(table["bar"].nunique()) if len(table) else 0
    shown = int((table.drop_duplicates("bar")["last_batch"] - table.drop_duplicates("bar")["first_batch"] + 1).sum())
    repeats = sum(sum(sum(f) for f in step.values()) for step in repeated_rows(trace))
    noun = trace.vocabulary.lane_noun
    title = f"Rows per {noun} in each of {plural(total, 'step')}"
    epochs = epochs_of(trace)
    title += (f" ({plural(repeats, 'row')} loaded again{' within an epoch' if epochs > 1 else ''}: the sampler's padding)"
              if repeats else f" (no row loaded twice{' within an epoch' if epochs > 1 else ''})")
    shard = ("a contiguous shard split by hand (no DistributedSampler)" if trace.config.uneven
             else "its DistributedSampler shard")
    notes = [ddp_note(trace), f"each {noun} loads its own rows: its DataLoader, {shard}"]
    per_rank = getattr(trace.config, "batch_per_process", False) and trace.config.batch_size
    if per_rank:  # code carried over from DataParallel: its batch_size now counts each process's rows
        ranks = len(trace.lanes)
        notes.append(f"batch_size is per process: each {noun} loads {per_rank:,} rows a step, "
                     f"{per_rank * ranks:,} on {plural(ranks, noun)}")
    if bars < shown:
        notes.append(f"{plural(shown, 'step')} in {plural(bars, 'bar')}: consecutive steps with the same rows share one")
    if shown < total:
        notes.append(f"first {plural(shown, 'step')} of {total:,} shown (at most {MAX_MARKS:,} marks)")
    if trace.failure is not None:  # the error's words are the file's: plotly reads HTML
        notes.append(f"step {counted(trace.failure.batch)} failed: {plotly_text(trace.failure.headline, 80)}")
    if repeats and len(table) and bars * len(trace.lanes) <= TEXT_CELLS:
        notes.append("* in the grid: the rank loaded a row again")
    names = [trace.vocabulary.lane_name(lane.id) for lane in trace.lanes]
    alone = left_alone(trace, table)
    if alone is not None:  # the lesson is the hang: said in the title, and marked on the step's bar
        label, loaded, _ = alone
        title = f"Rows per {noun} in each of {plural(total, 'step')}: {device_list(loaded, noun)} alone in step {label}"
    fig = plot_split_ddp(table, lane_names=names, title=title, notes=notes,
                         x_title="steps (a range shares one bar)" if bars < shown else "step")
    if alone is not None:
        label = alone[0]
        rows = int(table.loc[table["label"] == label, "rows"].sum())
        # Over the lone bar, within its slot (the title says the rest): a category's position is its index (the
        # label "4" would be read as a fifth slot)
        at = table.drop_duplicates("bar")["label"].tolist().index(label)
        fig.add_annotation(x=at, y=rows, xref="x", yref="y", yanchor="bottom", yshift=6, showarrow=False,
                           text="alone, it<br>waits for<br>the timeout", align="center", name="left alone")
        # the bars' slots as they were: plotly widens a category axis for text near its end
        fig.update_xaxes(range=[-0.5, len(table.drop_duplicates("bar")) - 0.5])
    return fig
