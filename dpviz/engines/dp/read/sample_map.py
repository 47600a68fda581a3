"""DataParallel's Sample map: which dataset row went to which batch and which device."""
from __future__ import annotations


import plotly.graph_objects as go

from dpviz.trace import Trace
from dpviz.analysis.wording import plural
from dpviz.figures.trace_words import backend_note
from dpviz.figures.sample_map import plot_sample_map
from dpviz.figures.sample_map import prepare_sample_map


def sample_map_dp_figure(trace: Trace) -> go.Figure:
    """Which dataset row went to which batch and which GPU: the shuffle and the contiguous slices."""
    table = prepare_sample_map(trace)
    config = trace.config
    order = "shuffled (shuffle=True)" if config.shuffle else "in order (shuffle=False)"
    title = f"{plural(len(table), 'dataset row')} in {plural(len(trace.batches), 'batch')}, {order}"
    return plot_sample_map(table, devices=len(trace.lanes), data_size=config.data_size, batches=len(trace.batches),
                           title=title, notes=[backend_note(trace)])
