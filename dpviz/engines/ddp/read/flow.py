"""Flow of one DDP step as a Sankey diagram: what moves, and what does not.

Each rank reads its own rows from the dataset (its DistributedSampler shard), runs forward, loss and
backward on them on its own copy of the model, and, training, sends its gradients into the all-reduce,
from which every rank gets the same mean back for its own optimizer step. Nothing is scattered from
one device, nothing is replicated, nothing is gathered. Link widths are rows; hovers give the rows and
the gradient bytes each rank all-reduced in the step.

Plotly places a fixed node by its centre and gives it the height d3-sankey gives it (rows × one scale
for the whole chart, the scale that fits the fullest column with `pad` between its nodes). The ranks'
nodes are stacked here exactly so (`node_extents`), so every node lies inside the plot and the
columns' names, over the plot, never sit behind one. Each rank's name sits on its band in a tag of
its own colour, written in the colour that contrasts most with it (colors.text_color_on).
"""
from __future__ import annotations

from dpviz.analysis.batch_facts import batches_planned
import math

import plotly.graph_objects as go

from dpviz.trace import Trace
from dpviz.analysis.wording import device_list, human_bytes, numbered, plural
from dpviz.figures.colors import OUTLINE, device_color, text_color_on, with_alpha
from dpviz.engines.dp.read.flow import BATCH_COLOR
from dpviz.engines.dp.read.flow_draw import FAILED_COLOR
from dpviz.figures.arguments import check_batch
from dpviz.figures.layout import styled, title_block_px
from dpviz.figures.sizes import GAP_PX, LINE_EM, MARGIN
from dpviz.figures.text_fit import text_px
from dpviz.figures.trace_words import backend_note

PREVIEW = 6  # dataset rows named in a hover before "…"
PAD_PX, THICKNESS_PX = 22, 22  # between two ranks' nodes (a rank's tag is about as tall), and a node's width
LANE_PX, MIN_PLOT_PX = 70, 260  # the plot's height: per rank, and at least
COLUMN_SIZE, COLUMN_GAP_PX = 14, 8  # the columns' names: their size, and their gap over the nodes
TAG_SIZE = 14  # a rank's name on its band, its rows under it: two short lines fit the band on a projector
# The columns' places, as shares of the plot's width: the dataset, each rank's rows, its compute, and its step at
# the right edge; the all-reduce's is worked out between the last two (hub_x).
DATASET_X, ROWS_X, COMPUTE_X, STEP_X = 0.01, 0.28, 0.55, 0.99
# A Sankey has no axis to name beside it: a narrow left margin leaves the columns' names the chart's width.
LEFT_PX = 20
# The narrowest the chart is drawn: 452 px measured in an 800 px window (NARROWEST_PX, 468, the most it may be).
CHART_PX = 440


def prepare_flow_ddp(trace: Trace, step: int) -> list[dict]:
    """One row per rank with a batch in `step`: its rows, the dataset rows, the gradient bytes it all-reduced, and
    whether its forward ran (a step that failed at the forward's start still loaded its rows: shown as loaded)."""
    check_batch(trace, step)
    reduced: dict[int, int] = {}
    layouts = [lay for lay in trace.facts.get("ddp", {}).get("buckets", []) if lay["step"] <= step]
    sizes = {b["index"]: b["bytes"] for b in layouts[-1]["buckets"]} if layouts else {}
    for span in trace.spans_of(step, "allreduce"):
        reduced[span.lane] = reduced.get(span.lane, 0) + sizes.get(span.group, 0)
    forwards = {span.lane: span for span in trace.spans_of(step, "forward")}
    loads = {span.lane: span for span in trace.spans_of(step, "load") if span.rows}
    rows = []
    for lane in sorted(forwards.keys() | loads.keys()):
        span = forwards.get(lane, loads.get(lane))
        rows.append({"rank": lane, "rows": span.rows, "ids": trace.sample_ids(span), "allreduced": reduced.get(lane),
                     "reduces": lane in reduced, "computed": lane in forwards})
    return rows


def node_extents(values: list[float], plot_px: float, pad_px: float = PAD_PX) -> tuple[list[float], float]:
    """Where a column of nodes with these values sits when stacked top to bottom, filling `plot_px`:
    (the centre of each, as a share of the plot's height from its top), and the pixels per unit of
    value (d3-sankey's scale: the fullest column fills the plot with `pad_px` between its nodes)."""
    n = len(values)
    pad = min(pad_px, plot_px / (n - 1)) if n > 1 else 0.0
    total = sum(values)
    scale = (plot_px - (n - 1) * pad) / total if total > 0 else 0.0
    centres, top = [], 0.0
    for value in values:
        centres.append((top + value * scale / 2) / plot_px)
        top += value * scale + pad
    return centres, scale


def _lines(text: str) -> int:
    return text.count("<br>") + 1


def _widest(words: str) -> float:
    """Pixels of the widest line of a column's name."""
    return max(text_px(line, COLUMN_SIZE) for line in words.split("<br>"))


def hub_x(compute: str, step: str) -> float:
    """The all-reduce column's place: midway between the compute column's name (centred over its column) and
    the step's (ending at the plot's right edge) on the narrowest chart, so its own name has the room between."""
    plot = CHART_PX - LEFT_PX - MARGIN["r"]
    return (COMPUTE_X * plot + _widest(compute) / 2 + STEP_X * plot - _widest(step)) / 2 / plot


def flow_ddp_figure(trace: Trace, step: int) -> go.Figure:
    ranks = prepare_flow_ddp(trace, step)
    vocabulary = trace.vocabulary
    allreduce_color = vocabulary.phase("allreduce").color  # the timeline's colour for it too
    reduces = any(r["reduces"] for r in ranks)
    failed = trace.failure is not None and trace.failure.batch == step
    n = len(ranks)
    plot_px = max(MIN_PLOT_PX, LANE_PX * n)
    # The ranks' columns fill the plot, each rank's node as tall as its rows; plotly reads y as a node's centre
    # and skips a 0, so an empty rank's node sits a hair below the top.
    centres, _ = node_extents([r["rows"] for r in ranks], plot_px)
    spread = [max(c, 1e-4) for c in centres]
    # Nodes: the dataset, each rank's rows, each rank's compute, the all-reduce (training), each rank's step.
    labels = ["dataset"]
    labels += [f"{vocabulary.lane_name(r['rank'])}: {plural(r['rows'], 'row')}" for r in ranks]
    compute = "forward, loss, backward" if trace.config.train else "forward (output kept on the rank)"
    labels += [f"{vocabulary.lane_name(r['rank'])}: {compute}" if r["computed"] else
               f"{vocabulary.lane_name(r['rank'])}: its forward raised before it ran" for r in ranks]
    colors = [BATCH_COLOR] + [device_color(r["rank"]) for r in ranks]
    colors += [device_color(r["rank"]) if r["computed"] else FAILED_COLOR for r in ranks]
    compute_words = "forward,<br>loss,<br>backward" if trace.config.train else "forward"
    step_words = vocabulary.phase("step").label.replace(" ", "<br>")
    hub = hub_x(compute_words, step_words)
    x = [DATASET_X] + [ROWS_X] * n + [COMPUTE_X] * n
    y = [0.5] + spread * 2
    source, target, value, link_colors, hover = [], [], [], [], []
    for i, r in enumerate(ranks):
        shown = ", ".join(map(str, r["ids"][:PREVIEW])) + (", …" if len(r["ids"]) > PREVIEW else "")
        source += [0, 1 + i]
        target += [1 + i, 1 + n + i]
        value += [r["rows"], r["rows"]]
        link_colors += [with_alpha(device_color(r["rank"]), 0.45)] * 2
        hover += [f"{vocabulary.lane_name(r['rank'])} reads its own rows: {shown}",
                  f"{vocabulary.lane_name(r['rank'])} computes on its own copy of the model" if r["computed"] else
                  f"{vocabulary.lane_name(r['rank'])}'s forward raised before it ran: the step ends here"]
    if reduces:
        hub_node = len(labels)
        labels.append("all-reduce (mean)")
        colors.append(FAILED_COLOR if failed else allreduce_color)
        x.append(hub)
        y.append(0.5)
        if not failed:  # a failed all-reduce hands nothing back: no rank steps
            labels += [f"{vocabulary.lane_name(r['rank'])}: {vocabulary.phase('step').label}" for r in ranks]
            colors += [device_color(r["rank"]) for r in ranks]
            x += [STEP_X] * n
            y += spread
        for i, r in enumerate(ranks):
            sent = human_bytes(r["allreduced"] or 0)
            source += [1 + n + i]
            target += [hub_node]
            value += [r["rows"]]
            link_colors += [with_alpha(allreduce_color, 0.35)]
            hover += [f"{vocabulary.lane_name(r['rank'])} sends its gradients ({sent}) into the all-reduce"
                      + (", which never completed" if failed else "")]
            if not failed:
                source += [hub_node]
                target += [hub_node + 1 + i]
                value += [r["rows"]]
                link_colors += [with_alpha(allreduce_color, 0.35)]
                hover += [f"{vocabulary.lane_name(r['rank'])} gets the mean of every rank's gradients back"]
    columns = [(DATASET_X, "dataset"), (ROWS_X, "its own<br>rows"), (COMPUTE_X, compute_words)]
    if reduces:
        columns += [(hub, "all-reduce<br>(mean)")] + ([] if failed else [(STEP_X, step_words)])
    # No label on the nodes (plotly writes it on the band beside them in the theme's ink, white on a pastel band
    # on the dark page): each rank's name is a tag on its band instead; hovers keep every node's words.
    sankey = go.Sankey(
        arrangement="fixed",
        node=dict(label=[""] * len(labels), color=colors, x=x, y=y, pad=PAD_PX, thickness=THICKNESS_PX,
                  line=dict(color=OUTLINE, width=0.5), customdata=labels, hovertemplate="%{customdata}<extra></extra>"),
        link=dict(source=source, target=target, value=value, color=link_colors, customdata=hover,
                  hovertemplate="%{customdata}<extra></extra>"),
    )
    rows = sum(r["rows"] for r in ranks)
    total = batches_planned(trace)
    idle = [lane.id for lane in trace.lanes if lane.id not in {r["rank"] for r in ranks}]
    title = (f"{numbered(step, total, 'step').capitalize()}: {plural(rows, 'row')} on {plural(n, vocabulary.lane_noun)}"
             + (", each reading its own" if n > 1 else ""))
    if idle:  # out of rows (uneven batches): they take no part in this step
        title += f"; {device_list([i + vocabulary.first_lane for i in idle], vocabulary.lane_noun)} had none"
    notes = [backend_note(trace), "no scatter, no replicate, no gather" + (": only the gradients move" if reduces else
             ": nothing moves between the ranks in this step")]
    if failed:
        notes.append(f"this step failed on {vocabulary.lane_name(trace.failure.replica)}"
                     if trace.failure.replica is not None else "this step failed")
    names = [dict(x=cx, y=1.0, xref="paper", yref="paper", xanchor="right" if cx > 0.9 else "left" if cx < 0.1 else "center",
                  yanchor="bottom", yshift=COLUMN_GAP_PX, text=words, showarrow=False, font=dict(size=COLUMN_SIZE),
                  name="column") for cx, words in columns]
    tags = [dict(x=ROWS_X, xref="paper", xshift=THICKNESS_PX / 2 + 4, xanchor="left", y=1 - centre, yref="paper",
                 yanchor="middle", text=f"{vocabulary.lane_name(r['rank'])}<br>{plural(r['rows'], 'row')}",
                 showarrow=False, bgcolor=device_color(r["rank"]), borderpad=2,
                 font=dict(size=TAG_SIZE, color=text_color_on(device_color(r["rank"]))), name="rank tag")
            for r, centre in zip(ranks, centres)]
    fig = go.Figure(sankey, layout=dict(annotations=names + tags))
    styled(fig, title, notes)
    # Under the title block: the columns' names (up to three lines) and their gap over the nodes.
    over = math.ceil(max(_lines(w) for _, w in columns) * COLUMN_SIZE * LINE_EM) + COLUMN_GAP_PX + 6
    top, bottom = title_block_px(fig) + GAP_PX + over, fig.layout.margin.b
    return fig.update_layout(margin_t=top, margin_l=LEFT_PX, height=top + plot_px + bottom)
