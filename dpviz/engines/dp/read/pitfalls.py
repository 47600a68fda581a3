"""The pitfall a DataParallel run ran into, drawn from its trace: one figure, or None when it shows none.

    pitfall_figure(trace)   # h0 cut on the wrong dim, a gathered loss vector's mean, or state lost in forward

Each kind has its own file (pitfall_hidden, pitfall_loss, pitfall_state) whose figure function returns
None when the trace shows no such pitfall; the first that draws is the run's. The keyword pitfall
(replicas called without x) is drawn where it happens, in the Split and Inputs views.
"""
from __future__ import annotations

import plotly.graph_objects as go

from dpviz.trace import Trace
from dpviz.engines.dp.read.pitfall_hidden import hidden_dim_figure
from dpviz.engines.dp.read.pitfall_loss import loss_bias_figure
from dpviz.engines.dp.read.pitfall_state import state_figure

PITFALL_FIGURES = (hidden_dim_figure, loss_bias_figure, state_figure)


def pitfall_figure(trace: Trace) -> go.Figure | None:
    """The figure of the pitfall this run shows, or None when it shows none of them."""
    for build in PITFALL_FIGURES:
        fig = build(trace)
        if fig is not None:
            return fig
    return None
