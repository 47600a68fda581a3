"""Inputs: what each device received of each argument of one batch's call, split or whole.

A grid, one row per argument (or per tensor inside a tuple or dict) and one column per device. A
tensor's chunk is drawn in its device's colour with its shape; an object handed whole to every
replica is drawn in one colour for "the same object" and another for "rebuilt whole", so a Python
list that every replica gets in full stands out; an argument a replica did not get (the keyword
pitfall) is marked missing, and a device with no replica idle. Sampled for the first and the last
batch, and for a batch that failed.
"""
from __future__ import annotations

from dpviz.analysis.batch_facts import batches_planned
import pandas as pd
import plotly.graph_objects as go

from dpviz.echo import plotly_text
from dpviz.analysis.wording import device_list, numbered
from dpviz.trace import Trace
from dpviz.figures.colors import (IDLE_GREY, MISSING, MISSING_PATTERN, OUTLINE, device_color, device_pattern, hatch_ink,
                                  text_color_on)
from dpviz.engines.dp.read.pitfall_layout import title_on_top
from dpviz.figures.layout import styled
from dpviz.figures.trace_words import NAME_LIMIT, backend_note, device_name

SHARED, COPIED = "#E2CFA4", "#F2B8C6"  # light neutrals: whole objects, apart from every device's own colour
CELL = 0.9  # a cell's height, in rows
RAISED = "✗ raised"
NAMED = 4  # up to this many GPUs the columns say "GPU 3"; past it "3" under an axis titled "GPU"  # beside the name of the GPU whose replica's error stopped the run
MODE_WORDS = {"split": "a chunk of the tensor", "shared": "the same object on every GPU",
              "copied": "rebuilt whole for every GPU", "missing": "not passed to this replica", "idle": "no replica"}
COLUMNS = ["argument", "device", "replica", "mode", "kind", "shape", "text"]
NAMES_SHOWN = 4  # argument names listed in a title or a note before "and N more"


def argument_batches(trace: Trace) -> list[int]:
    """The batches whose arguments were recorded, in order."""
    return sorted({a.batch for a in trace.arguments})


def _check_batch(trace: Trace, batch: int | None) -> int:
    sampled = argument_batches(trace)
    if not sampled:
        raise ValueError("this trace records no arguments (it was written by a dpviz before schema version 2)")
    if batch is None:
        return sampled[0]
    if isinstance(batch, bool) or batch not in sampled:
        raise ValueError(f"arguments were recorded for batches {', '.join(map(str, sampled))} only, got {batch!r}")
    return batch


def _cell_text(mode: str, kind: str, shape: list[int]) -> str:
    if mode == "split":
        return " × ".join(str(n) for n in shape) if shape else "0-dim"
    if mode in ("missing", "idle"):
        return mode
    size = f" of {shape[0]}" if shape else ""
    return f"{kind.split(' of ')[0]}{size}, {'same object' if mode == 'shared' else 'whole'}"


def prepare_inputs(trace: Trace, batch: int | None = None) -> pd.DataFrame:
    """One row per (argument, device) of `batch` (default: the first recorded batch)."""
    batch = _check_batch(trace, batch)
    samples = [a for a in trace.arguments if a.batch == batch]
    paths = list(dict.fromkeys(a.path for a in samples))  # in call order
    got = {(a.lane, a.path): a for a in samples}
    replicas = {a.lane for a in samples}
    records = []
    for path in paths:
        for lane in trace.lanes:
            a = got.get((lane.id, path))
            if a is not None:
                records.append((path, lane.id, a.replica, a.mode, a.kind, a.shape, _cell_text(a.mode, a.kind, a.shape)))
            else:
                mode = "missing" if lane.id in replicas else "idle"
                records.append((path, lane.id, -1, mode, "", [], mode))
    return pd.DataFrame.from_records(records, columns=COLUMNS)


def _fill(mode: str, device: int) -> tuple[str, str]:
    """A cell's colour and hatch: a chunk in its device's own colour (hatched for GPUs 8-15), the rest neutral."""
    if mode == "split":
        return device_color(device), device_pattern(device)
    if mode == "missing":
        return MISSING, MISSING_PATTERN
    return {"shared": SHARED, "copied": COPIED}.get(mode, IDLE_GREY), ""


def _labels(paths: list[str]) -> list[str]:
    """The arguments' names as axis labels: shown as text, cut short, and still one label per argument."""
    labels: list[str] = []
    for path in paths:
        label = base = plotly_text(path, NAME_LIMIT)
        while label in labels:  # two long names cut to the same start
            label = f"{base} ({sum(1 for other in labels if other.startswith(base)) + 1})"
        labels.append(label)
    return labels


def _names(paths) -> str:
    """Argument names for a title or a note (keywords without their '='), shown as text, at most NAMES_SHOWN."""
    names = [plotly_text(p.rstrip("="), NAME_LIMIT) for p in paths]
    more = f" and {len(names) - NAMES_SHOWN:,} more" if len(names) > NAMES_SHOWN else ""
    return ", ".join(names[:NAMES_SHOWN]) + more


def _short(text: str) -> str:
    """A cell's words on two short lines: the colour and the legend say the rest ("list of 10<br>whole")."""
    return text.replace(", same object", "<br>same").replace(", whole", "<br>whole")


def _cells(fig: go.Figure, part: pd.DataFrame, colours: list[str], hatch: str, names: list[str], row_of: dict,
           labels: dict, mode: str, *, legend: bool, devices: int) -> None:
    """One bar trace of `mode`'s cells in `part`: their fills, and `hatch` over them all (one fill then) in the ink the
    labels do not take."""
    # Argument names and kinds come from the trace (a file, perhaps): plotly would render their tags.
    words = [plotly_text(t, NAME_LIMIT) for t in part["text"]]
    inks = [text_color_on(c) for c in colours]
    fill = colours[0] if hatch else colours
    pattern = dict(fillmode="overlay", shape=hatch, fgcolor=hatch_ink(inks[0]), fgopacity=0.45) if hatch else None
    fig.add_trace(go.Bar(
        x=[names[d] for d in part["device"]], y=[CELL] * len(part), base=[row_of[p] - CELL / 2 for p in part["argument"]],
        name=MODE_WORDS[mode], legendgroup=mode, showlegend=legend, width=0.94,
        marker=dict(color=fill, line=dict(color=OUTLINE, width=0.6), pattern=pattern),
        text=[_short(w) for w in words], textposition="inside", insidetextanchor="middle", textangle=0,
        insidetextfont=dict(color=inks, size=14 if devices <= 8 else 11),
        customdata=[[labels[p], w, MODE_WORDS[mode]] for p, w in zip(part["argument"], words)],
        hovertemplate="%{x}, %{customdata[0]}: %{customdata[1]} (%{customdata[2]})<extra></extra>",
    ))


def plot_inputs(table: pd.DataFrame, *, devices: int, title: str, notes: list[str], raised: int | None = None) -> go.Figure:
    """Draw the grid as bars, one per cell, so a chunk can take its device's colour and hatch; one bar
    trace per kind of cell gives each its legend entry. `raised`: the device whose replica raised."""
    paths = list(dict.fromkeys(table["argument"]))
    labels = dict(zip(paths, _labels(paths)))
    row_of = {p: i for i, p in enumerate(paths)}
    # Past NAMED, the number alone under an axis titled "GPU", so sixteen names stay level in a narrow chart.
    names = [(device_name(d) if devices <= NAMED else str(d)) + (f" {RAISED[0]}" if d == raised else "") for d in range(devices)]
    fig = go.Figure()
    for mode in ("split", "shared", "copied", "missing", "idle"):  # a legend entry for each kind of cell present
        part = table[table["mode"] == mode]
        fills = [_fill(mode, d) for d in part["device"]]
        # plotly draws a hatch in the ink asked for only on a bar trace of one fill: given a list of fills it picks its
        # own ink. So each hatched fill is a trace of its own, its hatch in the ink its label does not need; the plain
        # cells of a kind share one.
        keys = [(c, h) if h else None for c, h in fills]
        for k, key in enumerate(dict.fromkeys(keys)):
            rows = [i for i, mine in enumerate(keys) if mine == key]
            _cells(fig, part.iloc[rows], [fills[i][0] for i in rows], key[1] if key else "", names, row_of, labels,
                   mode, legend=k == 0, devices=devices)
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=names, side="top", showgrid=False,
                     tickangle=0, tickfont=dict(size=14 if devices <= 8 else 12), title_text=None if devices <= NAMED else "GPU")
    fig.update_yaxes(tickmode="array", tickvals=list(range(len(paths))), ticktext=[labels[p] for p in paths],
                     range=[len(paths) - 0.5, -0.5], showgrid=False, zeroline=False)
    fig.update_layout(barmode="overlay", legend=dict(orientation="h", x=0, y=-0.04, yanchor="top"))
    # One note a line: a failure's own words would push the others past a narrow chart's edge.
    styled(fig, title, ["<br>".join(n for n in notes if n)], height=240 + 80 * len(paths))
    lines = title.count("<br>") + 1, len(notes)
    title_on_top(fig, 50 + 26 * lines[0] + 20 * lines[1] + 45)  # the device names sit on top, under the subtitle
    return fig


def inputs_figure(trace: Trace, batch: int | None = None) -> go.Figure:
    """What each device received of each argument of `batch` (default: the first recorded batch)."""
    batch = _check_batch(trace, batch)
    table = prepare_inputs(trace, batch)
    whole = sorted(set(table.loc[table["mode"].isin(["shared", "copied"]), "argument"]))
    missing = table[table["mode"] == "missing"]
    title = f"{numbered(batch, batches_planned(trace), 'Batch')}: what each GPU received,<br>tensors split along dim {trace.dim}"
    if whole:
        title += f", {_names(whole)} whole"
    notes = [backend_note(trace)]
    if len(missing):
        devices = sorted(set(missing["device"]))
        notes.append(f"{device_list(devices)} called without {_names(dict.fromkeys(missing['argument']))}")
    raised = None
    if trace.failure is not None and trace.failure.batch == batch:
        replica = trace.failure.replica
        lanes = {a.replica: a.lane for a in trace.arguments if a.batch == batch}
        raised = lanes.get(replica) if replica is not None else None
        who = f"{device_name(raised)} raised " if raised is not None else "this batch failed: "
        notes.append(f"{RAISED[0]} {who}{plotly_text(trace.failure.headline, 70)}")
    return plot_inputs(table, devices=len(trace.lanes), title=title, notes=notes, raised=raised)
