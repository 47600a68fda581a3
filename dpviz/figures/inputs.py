"""Inputs: what each device received of each argument of one batch's call, split or whole.

A grid, one row per argument (or per tensor inside a tuple or dict) and one column per device. A
tensor's chunk is drawn in its device's colour with its shape; an object handed whole to every
replica is drawn in one colour for "the same object" and another for "rebuilt whole", so a Python
list that every replica gets in full stands out; an argument a replica did not get (the keyword
pitfall) is marked missing, and a device with no replica idle. Sampled for the first and the last
batch, and for a batch that failed.
"""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ..echo import plotly_text
from ..wording import device_list
from ..trace import Trace
from .colors import IDLE_GREY, OUTLINE, device_color, with_alpha
from .style import NAME_LIMIT, backend_note, device_name, styled

SHARED, COPIED, MISSING = "#E2CFA4", "#F2B8C6", "#F4A582"  # light, so dark text reads on every cell
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


def _color(mode: str, device: int) -> str:
    return {"split": with_alpha(device_color(device), 0.45), "shared": SHARED, "copied": COPIED,
            "missing": MISSING}.get(mode, IDLE_GREY)


def _stepped(colors: list[str]) -> list[list]:
    """A colourscale giving integer z = i the colour colors[i] (use zmin=-0.5, zmax=len(colors)-0.5)."""
    scale: list[list] = []
    for i, color in enumerate(colors):
        scale += [[i / len(colors), color], [(i + 1) / len(colors), color]]
    return scale


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


def plot_inputs(table: pd.DataFrame, *, devices: int, title: str, notes: list[str]) -> go.Figure:
    """Draw the grid as a heatmap whose cells each take the colour of their mode (and device)."""
    paths = list(dict.fromkeys(table["argument"]))
    names = [device_name(d) for d in range(devices)]
    cell_colors = [_color(m, d) for m, d in zip(table["mode"], table["device"])]
    palette = list(dict.fromkeys(cell_colors))
    code = {c: i for i, c in enumerate(palette)}
    shape = (len(paths), devices)
    # Argument names and kinds come from the trace (a file, perhaps): plotly would render their tags.
    grid = table.assign(z=[code[c] for c in cell_colors], words=[MODE_WORDS[m] for m in table["mode"]],
                        shown=[plotly_text(t, NAME_LIMIT) for t in table["text"]])
    pivot = lambda column: grid.pivot(index="argument", columns="device", values=column).loc[paths].to_numpy()
    fig = go.Figure(go.Heatmap(
        z=pivot("z").astype(float).reshape(shape), x=names, y=_labels(paths), colorscale=_stepped(palette),
        zmin=-0.5, zmax=len(palette) - 0.5, showscale=False, xgap=3, ygap=3,
        text=pivot("shown").reshape(shape), texttemplate="%{text}",
        textfont=dict(size=14 if devices <= 8 else 11, color="#222222"),
        customdata=pivot("words").reshape(shape),
        hovertemplate="%{x}, %{y}: %{text} (%{customdata})<extra></extra>",
    ))
    for mode in ("split", "shared", "copied", "missing", "idle"):  # a legend entry for each kind of cell present
        if (table["mode"] == mode).any():
            fig.add_trace(go.Scatter(
                x=[None], y=[None], mode="markers", name=MODE_WORDS[mode],
                marker=dict(symbol="square", size=14, line=dict(color=OUTLINE, width=0.6),
                            color=with_alpha(device_color(0), 0.45) if mode == "split" else _color(mode, 0)),
            ))
    fig.update_xaxes(type="category", side="top", showgrid=False)
    fig.update_yaxes(type="category", autorange="reversed", showgrid=False)
    fig.update_layout(legend=dict(orientation="h", x=0, y=-0.04, yanchor="top"), plot_bgcolor="white")
    styled(fig, title, notes, height=240 + 80 * len(paths))
    fig.update_layout(margin=dict(t=130))  # the device names sit on top, under the subtitle
    return fig


def inputs_figure(trace: Trace, batch: int | None = None) -> go.Figure:
    """What each device received of each argument of `batch` (default: the first recorded batch)."""
    batch = _check_batch(trace, batch)
    table = prepare_inputs(trace, batch)
    whole = sorted(set(table.loc[table["mode"].isin(["shared", "copied"]), "argument"]))
    missing = table[table["mode"] == "missing"]
    title = f"Batch {batch:,}: what each GPU received, tensors split along dim {trace.dim}"
    if whole:
        title += f", {_names(whole)} whole"
    notes = [backend_note(trace)]
    if len(missing):
        devices = sorted(set(missing["device"]))
        notes.append(f"{device_list(devices)} called without {_names(dict.fromkeys(missing['argument']))}")
    if trace.failure is not None and trace.failure.batch == batch:
        notes.append(f"this batch failed: {plotly_text(trace.failure.headline, 120)}")
    return plot_inputs(table, devices=len(trace.lanes), title=title, notes=notes)
