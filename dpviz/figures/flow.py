"""Flow: one batch's journey as a Sankey diagram, batch -> one chunk per device -> gathered output.

Link widths are rows. Devices that got no chunk cannot be Sankey nodes (plotly drops nodes without
links and then misplaces the rest), so they are drawn as grey "idle" boxes under the device column.
"""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ..summary import batch_split
from ..trace import Trace
from .colors import IDLE_GREY, OUTLINE, TEXT, device_color, with_alpha
from ..summary import device_list
from .style import backend_note, check_batch, device_name, plural, rows_text, styled

BATCH_COLOR = "#4D4D4D"
PREVIEW_IDS = 8  # dataset row ids listed in a hover before "…"
IDLE_BAND = 0.2  # share of the figure height kept under the Sankey for idle boxes


def _preview(ids: list[int]) -> str:
    shown = ", ".join(str(i) for i in ids[:PREVIEW_IDS])
    return shown + (", …" if len(ids) > PREVIEW_IDS else "")


def prepare_flow(trace: Trace, batch: int) -> pd.DataFrame:
    """One row per device for `batch`: its slice of the batch, label and dataset rows (idle: used=False)."""
    check_batch(trace, batch)
    table = batch_split(trace, batch)
    ids = trace.batches[batch].sample_ids
    table["name"] = [device_name(d) for d in table["device"]]
    table["label"] = [
        f"{name}: {rows_text(first, rows)}" if used else f"{name}: idle"
        for name, first, rows, used in zip(table["name"], table["first_row"], table["rows"], table["used"])
    ]
    table["dataset_rows"] = [
        _preview(ids[first : first + rows]) if used else ""
        for first, rows, used in zip(table["first_row"], table["rows"], table["used"])
    ]
    return table


def _node_centres(rows: list[int], top: float, bottom: float, pad: float) -> list[float]:
    # Stack nodes top to bottom in device order, each as tall as its share of the rows.
    total = sum(rows) or 1
    free = (bottom - top) - pad * (len(rows) - 1)
    centres, y = [], top
    for r in rows:
        height = free * r / total
        centres.append(y + height / 2)
        y += height + pad
    return centres


def _shape(shape: list[int]) -> str:
    return " × ".join(f"{n:,}" for n in shape)


def plot_flow(table: pd.DataFrame, *, input_shape: list[int], output_shape: list[int], output_device: int,
              gathered: bool, title: str, notes: list[str]) -> go.Figure:
    """Draw a prepared flow table: batch node, one node per used device, output node, idle boxes."""
    used = table[table["used"]]
    idle = table[~table["used"]]
    out_name = device_name(output_device)
    how = "gathered in GPU order" if gathered else "one device: no gather"
    labels = (
        [f"input batch {_shape(input_shape)}"] + list(used["label"]) + [f"output {_shape(output_shape)} on {out_name}, {how}"]
    )
    colors = [BATCH_COLOR] + [device_color(d) for d in used["device"]] + [device_color(output_device)]
    n = len(used)
    node_ids = list(range(1, n + 1))
    y_devices = _node_centres(list(used["rows"]) or [1], 0.02, 0.98, 0.02 if n > 1 else 0.0)
    link_hover = [
        f"{label}<br>dataset rows {ids}" for label, ids in zip(used["label"], used["dataset_rows"])
    ]
    sankey = go.Sankey(
        arrangement="fixed",
        domain=dict(x=[0, 1], y=[IDLE_BAND if len(idle) else 0.0, 1]),
        node=dict(
            label=labels,
            color=colors,
            x=[0.01] + [0.5] * n + [0.99],
            y=[0.5] + y_devices + [0.5],
            pad=12,
            thickness=22,
            line=dict(color=OUTLINE, width=0.5),
            hovertemplate="%{label}<extra></extra>",
        ),
        link=dict(
            source=[0] * n + node_ids,
            target=node_ids + [n + 1] * n,
            value=list(used["rows"]) * 2,
            color=[with_alpha(device_color(d), 0.45) for d in used["device"]] * 2,
            customdata=link_hover * 2,
            hovertemplate="%{customdata}<extra></extra>",
        ),
        textfont=dict(size=15, color=TEXT),
    )
    fig = go.Figure(sankey)
    _add_idle_boxes(fig, list(idle["name"]))
    return styled(fig, title, notes, height=max(460, 60 + 34 * len(table)))


def _add_idle_boxes(fig: go.Figure, names: list[str]) -> None:
    per_row = 8
    for k, name in enumerate(names):
        row, col = divmod(k, per_row)
        in_row = min(per_row, len(names) - row * per_row)
        fig.add_annotation(
            text=f"{name} idle",
            x=0.5 + (col - (in_row - 1) / 2) * 0.11,
            y=IDLE_BAND * (0.62 - 0.45 * row),
            xref="paper", yref="paper", xanchor="center", showarrow=False,
            bgcolor=IDLE_GREY, bordercolor=OUTLINE, borderwidth=1, borderpad=4,
            font=dict(size=14, color=TEXT),
            hovertext=f"{name} got no rows of this batch: no replica ran there",
        )


def flow_figure(trace: Trace, batch: int = 0) -> go.Figure:
    """Sankey of `batch`: rows from the batch to each device's chunk, then to the output device."""
    table = prepare_flow(trace, batch)
    facts = trace.batches[batch]
    rows = facts.rows
    used = int(table["used"].sum())
    idle = table.loc[~table["used"], "device"].tolist()
    gathered = "gather" in trace.host_spans(batch)
    title = (
        f"Batch {batch:,} of {len(trace.batches):,}: {plural(rows, 'row')} scattered over "
        f"{used} of {plural(len(trace.lanes), 'GPU')}, gathered on {device_name(trace.output_device)}"
    )
    if not gathered:
        title = f"Batch {batch:,} of {len(trace.batches):,}: {plural(rows, 'row')} on {device_name(trace.output_device)} (one device, no gather)"
    notes = [backend_note(trace), f"{device_list(idle)} idle: no rows left for {'it' if len(idle) == 1 else 'them'}" if idle else ""]
    return plot_flow(table, input_shape=facts.input_shape, output_shape=facts.output_shape,
                     output_device=trace.output_device, gathered=gathered, title=title, notes=notes)
