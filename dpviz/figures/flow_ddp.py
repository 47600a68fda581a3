"""Flow of one DDP step as a Sankey diagram: what moves, and what does not.

Each rank reads its own rows from the dataset (its DistributedSampler shard), runs forward, loss and
backward on them on its own copy of the model, and, training, sends its gradients into the all-reduce,
from which every rank gets the same mean back for its own optimizer step. Nothing is scattered from
one device, nothing is replicated, nothing is gathered. Link widths are rows; hovers give the rows and
the gradient bytes each rank all-reduced in the step.
"""
from __future__ import annotations

import plotly.graph_objects as go

from dpviz.trace import Trace
from dpviz.analysis.wording import human_bytes
from dpviz.figures.colors import OUTLINE, device_color, with_alpha
from dpviz.figures.flow import BATCH_COLOR, FAILED_COLOR
from dpviz.figures.style import backend_note, check_batch, plural, styled

PREVIEW = 6  # dataset rows named in a hover before "…"


def prepare_flow_ddp(trace: Trace, step: int) -> list[dict]:
    """One row per rank with a batch in `step`: its rows, the dataset rows, and the gradient bytes it all-reduced."""
    check_batch(trace, step)
    reduced: dict[int, int] = {}
    layouts = [lay for lay in trace.facts.get("ddp", {}).get("buckets", []) if lay["step"] <= step]
    sizes = {b["index"]: b["bytes"] for b in layouts[-1]["buckets"]} if layouts else {}
    for span in trace.spans_of(step, "allreduce"):
        reduced[span.lane] = reduced.get(span.lane, 0) + sizes.get(span.bucket, 0)
    rows = []
    for span in sorted(trace.spans_of(step, "forward"), key=lambda s: s.lane):
        ids = trace.sample_ids(span)
        rows.append({"rank": span.lane, "rows": span.rows, "ids": ids, "allreduced": reduced.get(span.lane),
                     "reduces": span.lane in reduced})
    return rows


def flow_ddp_figure(trace: Trace, step: int) -> go.Figure:
    ranks = prepare_flow_ddp(trace, step)
    vocabulary = trace.vocabulary
    allreduce_color = vocabulary.phase("allreduce").color  # the timeline's colour for it too
    reduces = any(r["reduces"] for r in ranks)
    failed = trace.failure is not None and trace.failure.batch == step
    n = len(ranks)
    # Nodes: the dataset, each rank's rows, each rank's compute, the all-reduce (training), each rank's step.
    labels = ["dataset"]
    labels += [f"{vocabulary.lane_name(r['rank'])}: {plural(r['rows'], 'row')}" for r in ranks]
    compute = "forward, loss, backward" if trace.config.train else "forward (output kept on the rank)"
    labels += [f"{vocabulary.lane_name(r['rank'])}: {compute}" for r in ranks]
    colors = [BATCH_COLOR] + [device_color(r["rank"]) for r in ranks] * 2
    x = [0.01] + [0.28] * n + [0.55] * n
    spread = [0.5] if n == 1 else [0.05 + 0.9 * i / (n - 1) for i in range(n)]
    y = [0.5] + spread * 2
    source, target, value, link_colors, hover = [], [], [], [], []
    for i, r in enumerate(ranks):
        shown = ", ".join(map(str, r["ids"][:PREVIEW])) + (", …" if len(r["ids"]) > PREVIEW else "")
        source += [0, 1 + i]
        target += [1 + i, 1 + n + i]
        value += [r["rows"], r["rows"]]
        link_colors += [with_alpha(device_color(r["rank"]), 0.45)] * 2
        hover += [f"{vocabulary.lane_name(r['rank'])} reads its own rows: {shown}",
                  f"{vocabulary.lane_name(r['rank'])} computes on its own copy of the model"]
    if reduces:
        hub = len(labels)
        labels.append("all-reduce (mean)")
        colors.append(FAILED_COLOR if failed else allreduce_color)
        x.append(0.78)
        y.append(0.5)
        labels += [f"{vocabulary.lane_name(r['rank'])}: {vocabulary.phase('step').label}" for r in ranks]
        colors += [device_color(r["rank"]) for r in ranks]
        x += [0.99] * n
        y += spread
        for i, r in enumerate(ranks):
            sent = human_bytes(r["allreduced"] or 0)
            source += [1 + n + i, hub]
            target += [hub, hub + 1 + i]
            value += [r["rows"], r["rows"]]
            link_colors += [with_alpha(allreduce_color, 0.35)] * 2
            hover += [f"{vocabulary.lane_name(r['rank'])} sends its gradients ({sent}) into the all-reduce",
                      f"{vocabulary.lane_name(r['rank'])} gets the mean of every rank's gradients back"]
    # Only the first column's nodes carry a label ("rank 0: 8 rows"); the others' columns are named once
    # over the chart, so no label runs into the next column on a narrow chart. Hovers keep every node's words.
    shown = [label if 0 < i <= n else "" for i, label in enumerate(labels)]
    columns = [(0.01, "dataset"), (0.28, "its own<br>rows"),
               (0.55, "forward,<br>loss,<br>backward" if trace.config.train else "forward")]
    if reduces:
        columns += [(0.78, "all-reduce<br>(mean)"), (0.99, vocabulary.phase("step").label.replace(" ", "<br>"))]
    sankey = go.Sankey(
        arrangement="fixed",
        node=dict(label=shown, color=colors, x=x, y=y, pad=12, thickness=22, line=dict(color=OUTLINE, width=0.5),
                  customdata=labels, hovertemplate="%{customdata}<extra></extra>"),
        link=dict(source=source, target=target, value=value, color=link_colors, customdata=hover,
                  hovertemplate="%{customdata}<extra></extra>"),
        textfont=dict(size=15),  # beside the nodes, not on them: the page theme's ink
    )
    rows = sum(r["rows"] for r in ranks)
    title = (f"Step {step:,} of {len(trace.batches):,}: {plural(rows, 'row')} on {plural(n, vocabulary.lane_noun)}, "
             f"each reading its own")
    notes = [backend_note(trace), "no scatter, no replicate, no gather" + (": only the gradients move" if reduces else
             ": nothing moves between the ranks in this step")]
    if failed:
        notes.append(f"this step failed on {vocabulary.lane_name(trace.failure.replica)}"
                     if trace.failure.replica is not None else "this step failed")
    fig = go.Figure(sankey, layout=dict(annotations=[
        dict(x=cx, y=1.0, xref="paper", yref="paper", xanchor="right" if cx > 0.9 else "left" if cx < 0.1 else "center",
             yanchor="bottom",
             text=words, showarrow=False, font=dict(size=14)) for cx, words in columns]))
    styled(fig, title, notes, height=max(420, 70 * n + 160))
    return fig.update_layout(margin_t=fig.layout.margin.t + 56)  # the columns' names (up to 3 lines), over the nodes
