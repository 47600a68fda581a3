"""Flow: one batch's journey as a Sankey diagram, batch -> one chunk per device -> gathered output.

A training run goes on and comes back: the output's gradient (from the loss on the output device) is
split back by the gather's backward with the forward's chunk sizes, each replica's backward makes a
gradient for every parameter, those are summed onto device_ids[0] and the SGD step runs there.

Link widths are rows (of the batch, then of the output gradient). Devices that got no chunk cannot
be Sankey nodes (plotly drops nodes without links and then misplaces the rest), so they are drawn
as grey "idle" boxes under the device column.
"""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ..echo import plotly_text
from ..tables import batch_spans, batch_split
from ..wording import device_list, human_bytes
from ..trace import Trace
from .colors import IDLE_GREY, OUTLINE, TEXT, device_color, with_alpha
from .style import NAME_LIMIT, backend_note, check_batch, device_name, plural, rows_text, styled

BATCH_COLOR = "#4D4D4D"
FAILED_COLOR = "#CC3311"  # the output node of a batch whose call raised
PREVIEW_IDS = 8  # dataset row ids listed in a hover before "…"
IDLE_BAND = 0.2  # share of the figure height kept under the Sankey for idle boxes
BACK_COLUMNS = ["device", "used", "rows", "first_row", "gradient_shape", "label"]
HEADER_Y = 0.93  # a training flow's Sankey ends here; column headers sit above it


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


def prepare_backward_flow(trace: Trace, batch: int) -> pd.DataFrame:
    """One row per device for `batch` of a training run: the slice of the output gradient the gather's
    backward sent it (rows, first row, shape), or used=False. Empty for a forward-only trace."""
    check_batch(trace, batch)
    backwards = {s.lane: s for s in batch_spans(trace, batch, "backward")}
    records = []
    for lane in trace.lanes:
        span = backwards.get(lane.id)
        if span is None:
            records.append((lane.id, False, 0, -1, None, f"{device_name(lane.id)}: idle"))
        else:
            label = f"{device_name(lane.id)}: gradient of {rows_text(span.row_offset, span.rows).split(' (')[0]}"
            records.append((lane.id, True, span.rows, span.row_offset, span.input_shape, label))
    table = pd.DataFrame.from_records(records, columns=BACK_COLUMNS)
    return table if table["used"].any() else table.iloc[0:0]


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
              gathered: bool, title: str, notes: list[str], failed: str | None = None) -> go.Figure:
    """Draw a prepared flow table: batch node, one node per used device, output node, idle boxes.
    `failed` replaces the output's label when the batch's call raised."""
    # A replica called with no rows (no tensor at all) has no width to draw: it goes with the idle boxes.
    used = table[table["used"] & (table["rows"] > 0)]
    idle = table[~table["used"] | (table["rows"] == 0)]
    out_name = device_name(output_device)
    how = "gathered in GPU order" if gathered else "no gather"
    # The output's label sits left of its node, facing the chunks' labels: two short lines, and the
    # chunks' column left of centre, keep them apart.
    output = failed or f"output {_shape(output_shape)}<br>on {out_name}, {how}"
    labels = [f"input batch {_shape(input_shape)}"] + list(used["label"]) + [output]
    colors = [BATCH_COLOR] + [device_color(d) for d in used["device"]] + [FAILED_COLOR if failed else device_color(output_device)]
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
            x=[0.01] + [0.4] * n + [0.99],
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
    _add_idle_boxes(fig, list(idle["name"]), [f"{n}: no rows" if u else f"{n} idle" for n, u in zip(idle["name"], idle["used"])])
    return styled(fig, title, notes, height=max(460, 60 + 34 * len(table)))


def plot_round_trip(table: pd.DataFrame, back: pd.DataFrame, *, input_shape: list[int], output_shape: list[int],
                    output_device: int, sum_device: int | None, step_device: int, parameter_bytes: int | None,
                    title: str, notes: list[str]) -> go.Figure:
    """Draw a training batch: the forward flow, then the output gradient split back to each device
    (`back`), every replica's parameter gradients summed on `sum_device` (None: one device, no sum)
    and the step on `step_device`."""
    used, idle, grads = table[table["used"]], table[~table["used"]], back[back["used"]]
    n, k = len(used), len(grads)
    out_name = device_name(output_device)
    # Nodes: batch, chunks, output and loss, gradient slices, [sum], step.
    chunk_ids = list(range(1, n + 1))
    out_id = n + 1
    grad_ids = list(range(n + 2, n + 2 + k))
    sum_id = n + 2 + k if sum_device is not None else None
    step_id = n + 3 + k if sum_device is not None else n + 2 + k
    # Sink nodes put their label on their left: the sum's column leaves room for its label and the step's.
    columns = [0.01, 0.19, 0.39, 0.59, 0.77, 0.99] if sum_device is not None else [0.01, 0.22, 0.45, 0.68, 0.99]
    # Six columns leave little room: two short lines per node instead of the forward view's one long one.
    chunk_labels = [f"{device_name(d)}<br>rows {f}-{f + r - 1}" for d, f, r in zip(used["device"], used["first_row"], used["rows"])]
    grad_labels = [f"{device_name(d)}<br>grad of rows {f}-{f + r - 1}" for d, f, r in zip(grads["device"], grads["first_row"], grads["rows"])]
    labels = ([f"input batch<br>{_shape(input_shape)}"] + chunk_labels
              + [f"output {_shape(output_shape)}<br>and loss on {out_name}"] + grad_labels)
    colors = ([BATCH_COLOR] + [device_color(d) for d in used["device"]] + [device_color(output_device)]
              + [device_color(d) for d in grads["device"]])
    top, bottom = 0.02, 0.98
    y_chunks = _node_centres(list(used["rows"]) or [1], top, bottom, 0.02 if n > 1 else 0.0)
    y_grads = _node_centres(list(grads["rows"]) or [1], top, bottom, 0.02 if k > 1 else 0.0)
    xs = [columns[0]] + [columns[1]] * n + [columns[2]] + [columns[3]] * k
    ys = [0.5] + y_chunks + [0.5] + y_grads
    if sum_device is not None:
        labels.append(f"sum of {k}<br>on {device_name(sum_device)}")
        colors.append(device_color(sum_device))
        xs.append(columns[4])
        ys.append(0.5)
    labels.append("SGD<br>step")
    colors.append(device_color(step_device))
    xs.append(columns[-1])
    ys.append(0.5)

    rows = [int(r) for r in used["rows"]]
    grad_rows = [int(r) for r in grads["rows"]]
    total = sum(grad_rows)
    forward_hover = [f"{label}<br>dataset rows {ids}" for label, ids in zip(used["label"], used["dataset_rows"])]
    size = f" ({human_bytes(parameter_bytes)})" if parameter_bytes else ""
    split_hover = [
        (f"gather's backward: the output gradient's {rows_text(first, r)}, {_shape(shape)}, sent back to {device_name(d)}"
         if sum_device is not None else f"the output gradient, {_shape(shape)}, stays on {device_name(d)}: nothing to split")
        for d, first, r, shape in zip(grads["device"], grads["first_row"], grads["rows"], grads["gradient_shape"])
    ]
    sum_hover = [
        f"{device_name(d)}'s replica: a gradient for every parameter{size}, added on {device_name(sum_device)}: a sum, not a mean"
        for d in grads["device"]
    ] if sum_device is not None else [f"{device_name(d)}: the gradients land in the model's own .grad" for d in grads["device"]]
    alpha = [with_alpha(device_color(d), 0.45) for d in used["device"]]
    back_alpha = [with_alpha(device_color(d), 0.3) for d in grads["device"]]
    source = [0] * n + chunk_ids + [out_id] * k + grad_ids
    target = chunk_ids + [out_id] * n + grad_ids + [sum_id if sum_id is not None else step_id] * k
    value = rows * 2 + grad_rows * 2
    link_colors = alpha * 2 + back_alpha * 2
    hover = forward_hover * 2 + split_hover + sum_hover
    if sum_id is not None:
        source.append(sum_id)
        target.append(step_id)
        value.append(total)
        link_colors.append(with_alpha(device_color(sum_device), 0.3))
        hover.append(f"the summed gradients, in the model's own .grad on {device_name(sum_device)}, used by the step")
    sankey = go.Sankey(
        arrangement="fixed",
        domain=dict(x=[0, 1], y=[IDLE_BAND if len(idle) else 0.0, HEADER_Y]),
        node=dict(label=labels, color=colors, x=xs, y=ys, pad=12, thickness=22,
                  line=dict(color=OUTLINE, width=0.5), hovertemplate="%{label}<extra></extra>"),
        link=dict(source=source, target=target, value=value, color=link_colors, customdata=hover,
                  hovertemplate="%{customdata}<extra></extra>"),
        textfont=dict(size=15, color=TEXT),
    )
    fig = go.Figure(sankey)
    headers = ["batch", "forward", "gather, loss", "backward", "sum", "step"] if sum_device is not None else \
        ["batch", "forward", "loss", "backward", "step"]
    for x, text in zip(columns, headers):
        fig.add_annotation(text=f"<b>{text}</b>", x=x, y=1.0, xref="paper", yref="paper", showarrow=False,
                           xanchor="left" if x < 0.05 else "right" if x > 0.95 else "center", yanchor="top",
                           font=dict(size=15, color="#555555"))
    _add_idle_boxes(fig, list(idle["name"]))
    return styled(fig, title, notes, height=max(520, 100 + 34 * len(table)))


def _add_idle_boxes(fig: go.Figure, names: list[str], texts: list[str] | None = None) -> None:
    per_row = 8
    texts = texts or [f"{name} idle" for name in names]
    step = max(0.11, 0.0085 * max(map(len, texts), default=0) + 0.02)  # longer labels need wider spacing
    per_row = min(per_row, int(0.98 // step))
    for k, (name, text) in enumerate(zip(names, texts)):
        row, col = divmod(k, per_row)
        in_row = min(per_row, len(names) - row * per_row)
        fig.add_annotation(
            text=text,
            x=0.5 + (col - (in_row - 1) / 2) * step,
            y=IDLE_BAND * (0.62 - 0.45 * row),
            xref="paper", yref="paper", xanchor="center", showarrow=False,
            bgcolor=IDLE_GREY, bordercolor=OUTLINE, borderwidth=1, borderpad=4,
            font=dict(size=14, color=TEXT),
            hovertext=(f"{name} got no rows of this batch: no replica ran there" if text.endswith("idle")
                       else f"{name}'s replica was called without a tensor of the batch"),
        )


def flow_figure(trace: Trace, batch: int = 0) -> go.Figure:
    """Sankey of `batch`: rows from the batch to each device's chunk, then to the output device; in a
    training run also back: the output gradient to each device, the gradients' sum and the step."""
    table = prepare_flow(trace, batch)
    facts = trace.batches[batch]
    rows = facts.rows
    used = int((table["used"] & (table["rows"] > 0)).sum())
    idle = table.loc[~table["used"], "device"].tolist()
    gathered = "gather" in trace.host_spans(batch)
    words, out = trace.vocabulary, trace.vocabulary.lane_name(trace.output_device)
    title = (
        f"Batch {batch:,} of {len(trace.batches):,}: {plural(rows, 'row')} scattered over "
        f"{used} of {plural(len(trace.lanes), words.lane_noun)}, {words.word('gathered', lane=out)}"
    )
    if not gathered:
        title = f"Batch {batch:,} of {len(trace.batches):,}: {plural(rows, 'row')} on {out} ({words.word('not_gathered')})"
    notes = [backend_note(trace), f"{device_list(idle)} idle: no rows left for {'it' if len(idle) == 1 else 'them'}" if idle else ""]
    failure = trace.failure
    if failure is not None and failure.batch == batch:
        where = f" in replica {failure.replica}" if failure.replica is not None else ""
        error = plotly_text(failure.type, NAME_LIMIT)  # the failure's words may come from a trace file
        title = f"Batch {batch:,} of {trace.config.num_batches:,}: {plural(rows, 'row')} scattered over {used} of " \
                f"{plural(len(trace.lanes), 'GPU')}, then {error}{where}"
        lost = rows - int(table.loc[table["used"], "rows"].sum())
        if lost > 0:  # zip truncation: fewer pieces of another argument than chunks of the batch
            notes.append(f"{plural(lost, 'row')} reached no replica")
        return plot_flow(table, input_shape=facts.input_shape, output_shape=[], output_device=trace.output_device,
                         gathered=False, title=title, notes=notes + [plotly_text(failure.original, 120)],
                         failed=f"no output:<br>{error}{where}")
    back = prepare_backward_flow(trace, batch)
    steps = batch_spans(trace, batch, "step")
    if back.empty or not steps:
        return plot_flow(table, input_shape=facts.input_shape, output_shape=facts.output_shape,
                         output_device=trace.output_device, gathered=gathered, title=title, notes=notes)
    reduces = batch_spans(trace, batch, "reduce")
    sum_device = reduces[0].lane if reduces else None
    if sum_device is not None:
        title += f", gradients summed back onto {device_name(sum_device)}"
        notes.append("widths: rows of the batch, then of the output gradient sent back")
    else:
        title += ", backward and step there"
    return plot_round_trip(table, back, input_shape=facts.input_shape, output_shape=facts.output_shape,
                           output_device=trace.output_device, sum_device=sum_device, step_device=steps[0].lane,
                           parameter_bytes=_parameter_bytes(trace), title=title, notes=notes)


def _parameter_bytes(trace: Trace) -> int | None:
    """The model's parameter bytes on device_ids[0], when the memory samples break memory down by kind."""
    sizes = [m.bytes for m in trace.memory if m.category == "parameters" and m.lane == trace.lanes[0].id]
    return max(sizes) if sizes else None
