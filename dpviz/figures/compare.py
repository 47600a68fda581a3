"""DataParallel beside DDP: what each device moves per step, by what moves, on the same settings.

Left, DataParallel's devices; right, DDP's ranks; one stacked bar per device, bytes per step on average
(computed from the traces: see dpviz.compare). DataParallel's device 0 sends every chunk and model copy
and takes back every output and gradient; DDP's ranks each all-reduce a share of the gradients.
"""
from __future__ import annotations

from collections import defaultdict

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..compare import traffic
from ..trace import Trace
from ..wording import human_bytes
from ..engines.ddp.vocabulary import VOCABULARY as DDP
from ..engines.dp.vocabulary import SUM_LABEL, VOCABULARY as DP
from .colors import OUTLINE
from .style import styled

# One colour per kind of traffic, the same in both panels: the colour of the phase that moves it where
# there is one (the timelines'), 3:1 on the light and the dark page, apart under colour blindness.
WHAT_COLORS = {
    "input chunk": DP.phase("scatter").color, "parameter copy": DP.phase("replicate").color,
    "output gathered": DP.phase("gather").color, "output gradient": "#AA22EE", "gradient sum": "#EE5555",
    "all-reduce": DDP.phase("allreduce").color, "buffers": DDP.phase("buffers").color,
}
# What the legend calls each kind: the phases' own names where dpviz.compare's differ.
WHAT_NAMES = {"gradient sum": SUM_LABEL}


def prepare_traffic(trace: Trace) -> pd.DataFrame:
    """Per device and kind of traffic: bytes sent plus received, per step on average."""
    totals: dict[tuple[int, str], int] = defaultdict(int)
    for move in traffic(trace):
        totals[(move.lane, move.what)] += move.sent + move.received
    steps = max(1, len(trace.batches))
    rows = [{"lane": lane.id, "device": trace.vocabulary.lane_name(lane.id), "what": what,
             "bytes": totals.get((lane.id, what), 0) / steps}
            for lane in trace.lanes for what in WHAT_COLORS]
    return pd.DataFrame(rows, columns=["lane", "device", "what", "bytes"])


def plot_traffic(tables: list[pd.DataFrame], titles: list[str], *, title: str, notes: list[str]) -> go.Figure:
    fig = make_subplots(rows=1, cols=len(tables), shared_yaxes=True, subplot_titles=titles, horizontal_spacing=0.06)
    shown: set[str] = set()
    for col, table in enumerate(tables, start=1):
        for what, color in WHAT_COLORS.items():
            part = table[(table["what"] == what) & (table["bytes"] > 0)]
            if part.empty:
                continue
            fig.add_trace(go.Bar(
                x=part["device"], y=part["bytes"], name=WHAT_NAMES.get(what, what), legendgroup=what,
                showlegend=what not in shown,
                marker=dict(color=color, line=dict(color=OUTLINE, width=0.6)),
                customdata=[human_bytes(b) for b in part["bytes"]],
                hovertemplate=f"%{{x}}<br>{WHAT_NAMES.get(what, what)}: %{{customdata}} per step<extra></extra>",
            ), row=1, col=col)
            shown.add(what)
    fig.update_layout(barmode="stack")  # styled() puts the legend over the panels' titles
    fig.update_yaxes(title_text="bytes per step (computed)", row=1, col=1)
    return styled(fig, title, notes, height=520)


def comparison_figure(dp: Trace, ddp: Trace) -> go.Figure:
    tables = [prepare_traffic(dp), prepare_traffic(ddp)]
    most = [t.groupby("device", sort=False)["bytes"].sum() for t in tables]
    titles = [f"DataParallel: {most[0].idxmax()} moves {human_bytes(most[0].max())}" if most[0].max() else "DataParallel",
              f"DDP: at most {human_bytes(most[1].max())} a rank" if most[1].max() else "DDP: nothing moves"]
    notes = [f"{len(dp.lanes)} {'simulated devices' if dp.simulated else 'GPUs'} against {len(ddp.lanes)} ranks "
             f"({'processes on the CPU' if ddp.backend == 'cpu' else 'one process per GPU'})",
             "bytes computed from the rows, outputs, parameters and gradients each run recorded"]
    return plot_traffic(tables, titles, title="What moves between devices in one step", notes=notes)
