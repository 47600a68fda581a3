"""Key figures of a run in words: a row of headline figures and the full table of them.

    key_figures(trace)       # six headline figures (eight with memory) as {label: text}, for a row of metrics
    summary_table(trace)     # all key figures as a two-column DataFrame for a page table
    summarize(trace)         # the numbers behind them

A DataParallel run's figures come from dpviz.analysis.batch_facts in plain Python (the page shows them under
its first chart on every new run); a DDP run's from dpviz.engines.ddp.read.summary's tables.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from dpviz.trace import Trace

if TYPE_CHECKING:  # for the annotations only: a DataParallel run's figures never import pandas
    import pandas as pd


def key_figures(trace: Trace) -> dict[str, str]:
    """The headline figures of a run, label -> short value, for a row of metrics beside the views: each
    engine's own (DDP's ranks, rows per rank and buckets have no chunks, replicas or output device)."""
    return trace.spec.part("summary")(trace)


def summary_table(trace: Trace) -> pd.DataFrame:
    """The key figures as rows of (key figure, value) text, ready for a table (a DataFrame)."""
    import pandas as pd

    return pd.DataFrame(trace.spec.part("summary_rows")(trace), columns=["key figure", "value"])


