"""FSDP × TP's mesh, drawn: the ranks as a grid of T rows (tp index) by ranks / T columns (dp_shard index), a line
through the ranks of each group that ran a collective together (measured: each rank wrote down the ranks of every
collective's process group), and on each rank its share of each parameter (DTensor's local shape over the whole).

    has_mesh(trace)         # a run with a tensor-parallel degree: the Mesh tab is shown
    mesh_figure(trace)      # the figure

Data first (`mesh_table`: one row per rank), then the drawing, as the other views do.
"""
from __future__ import annotations

from fractions import Fraction
from math import prod

import plotly.graph_objects as go

from dpviz.analysis.wording import plural
from dpviz.engines.fsdp.mesh import DP_SHARD, TP, coordinates, degrees, groups
from dpviz.engines.fsdp.read.mesh_fit import BOX_HEIGHT, BOX_WIDTH, NOTE_SIZE, fraction_words, rank_lines
from dpviz.figures.colors import OUTLINE, device_color, text_color_on
from dpviz.figures.layout import styled
from dpviz.figures.trace_words import backend_note
from dpviz.trace import Trace
from dpviz.trace.legend import kind_color

ROW_PX, BASE_PX = 150, 170  # a row of ranks (five lines of words at a projector's type: mesh_fit), and the rest
# A collective's op, as CommDebugMode names it, to the legend's kind (gloo and NCCL name them alike).
KINDS = (("reduce_scatter", "reduce-scatter"), ("gather", "all-gather"), ("reduce", "all-reduce"))
WHAT = {"all-reduce": "activations, inside every layer", "all-gather": "parameters, before a module runs",
        "reduce-scatter": "gradients, after its backward"}
OFFSET = {"all-reduce": 0.0, "all-gather": -0.06, "reduce-scatter": 0.06}  # two lines along one row apart


def has_mesh(trace: Trace) -> bool:
    """Whether the run had a tensor-parallel degree: the only runs with a mesh of two dimensions."""
    return trace.config.tp > 1


def kind_of(op: str) -> str | None:
    return next((kind for key, kind in KINDS if key in op), None)


def shares_of(rows: list[list]) -> list[tuple[Fraction, list[str]]]:
    """A rank's parameters grouped by the share it holds of each (local elements over whole), largest share first."""
    by: dict[Fraction, list[str]] = {}
    for name, _, local, whole in rows:
        by.setdefault(Fraction(prod(local), max(prod(whole), 1)), []).append(name)
    return sorted(by.items(), key=lambda item: -item[0])


def mesh_table(trace: Trace) -> list[dict]:
    """One row per rank: its coordinates, its shares, and the groups it ran each kind of collective in."""
    ranks, tp = len(trace.lanes), trace.config.tp
    measured = trace.facts.get("comm_groups") or [None] * ranks
    shares = trace.facts.get("shares") or [None] * ranks
    table = []
    for rank in range(ranks):
        ran: dict[str, set[tuple[int, ...]]] = {}
        for op, group, _ in measured[rank] or []:
            if kind_of(op) is not None and len(group) > 1:
                ran.setdefault(kind_of(op), set()).add(tuple(group))
        i, j = coordinates(rank, tp)
        table.append({"rank": rank, "dp_shard": i, "tp": j, "groups": ran,
                      "shares": shares_of(shares[rank] or [])})
    return table


def _group_lines(table: list[dict], tp: int) -> list[go.Scatter]:
    """A line through each group's ranks for each kind of collective, one legend entry per kind."""
    lines, shown = [], set()
    where = {row["rank"]: (row["dp_shard"], row["tp"]) for row in table}
    seen = sorted({(kind, group) for row in table for kind, found in row["groups"].items() for group in found})
    for kind, group in seen:
        xs = [where[r][0] + (OFFSET[kind] if kind != "all-reduce" else 0) for r in group if r in where]
        ys = [where[r][1] + OFFSET[kind] for r in group if r in where]
        dim = TP if kind == "all-reduce" else DP_SHARD
        lines.append(go.Scatter(
            x=xs, y=ys, mode="lines", line=dict(color=kind_color(kind), width=6 if kind == "all-reduce" else 4),
            name=f"{kind}: {WHAT[kind]}", legendgroup=kind, showlegend=kind not in shown,
            hovertemplate=f"{kind} in a {dim} group: ranks {', '.join(map(str, group))}<extra></extra>"))
        shown.add(kind)
    return lines


def mesh_figure(trace: Trace) -> go.Figure:
    tp = trace.config.tp
    dp, _ = degrees(len(trace.lanes), tp)
    table = mesh_table(trace)
    fig = go.Figure(data=_group_lines(table, tp))
    shapes, notes = [], []
    for row in table:
        x, y, rank = row["dp_shard"], row["tp"], row["rank"]
        fill = device_color(rank)
        ink = text_color_on(fill)
        shapes.append(dict(type="rect", x0=x - BOX_WIDTH / 2, x1=x + BOX_WIDTH / 2, y0=y - BOX_HEIGHT / 2,
                           y1=y + BOX_HEIGHT / 2, fillcolor=fill,
                           line=dict(color=OUTLINE, width=1), layer="above"))
        # Wrapped to the box on the narrowest chart, as fully as its lines hold: the hover names every parameter.
        text = "<br>".join(rank_lines(rank, f"{DP_SHARD} {x}, {TP} {y}", row["shares"], dp, ROW_PX))
        fig.add_annotation(x=x, y=y, text=text, showarrow=False, font=dict(size=NOTE_SIZE, color=ink), align="center")
    # The hover of each rank: every share, each parameter named.
    hover = ["<br>".join([f"rank {row['rank']} holds"] + [f"{fraction_words(share)} of: {', '.join(names)}"
                                                           for share, names in row["shares"]]) for row in table]
    fig.add_trace(go.Scatter(x=[row["dp_shard"] for row in table], y=[row["tp"] for row in table], mode="markers",
                             marker=dict(size=40, opacity=0), showlegend=False, hovertext=hover, hoverinfo="text"))
    grid = groups(len(trace.lanes), tp)
    notes.append(backend_note(trace))
    notes.append(f"{len(grid[TP])} {TP} groups (columns) of {plural(tp, 'rank')} all-reduce: tensor parallelism cuts "
                 f"every layer there; {len(grid[DP_SHARD])} {DP_SHARD} groups (rows) of {plural(dp, 'rank')} all-gather and "
                 "reduce-scatter: FSDP shards the slices again there")
    fig.update_layout(
        shapes=shapes,
        xaxis=dict(range=[-0.5, dp - 0.5], tickvals=list(range(dp)), ticktext=[f"{DP_SHARD} {i}" for i in range(dp)],
                   showgrid=False, zeroline=False, fixedrange=True, side="top"),
        yaxis=dict(range=[tp - 0.5, -0.5], tickvals=list(range(tp)), ticktext=[f"{TP} {j}" for j in range(tp)],
                   showgrid=False, zeroline=False, fixedrange=True),
        legend=dict(orientation="h", x=0, y=-0.02, yanchor="top"),
    )
    title = f"The mesh: {dp} {DP_SHARD} × {tp} {TP} = {plural(len(trace.lanes), 'rank')}, and what each rank holds"
    return styled(fig, title, notes, height=BASE_PX + ROW_PX * tp)
