"""The measured panel past DETAIL_BATCHES batches: one typical batch instead of a wall of slivers.

Every bar of the window is measured from the start of its own batch; each phase on each lane is then
drawn once, from the median of its starts to the median of its ends, with a whisker over the 25th to
the 75th percentile of its ends (the middle half of the batches). A lane left idle in most batches shows an idle band over the typical
batch. Medians and percentiles are robust: one slow batch moves neither the bars nor the scale.
"""
from __future__ import annotations

import pandas as pd

from dpviz.figures.timeline_look import IDLE

LOW, HIGH = 25, 75  # the whisker's percentiles: the middle half of the batches
TYPICAL_COLUMNS = ["device", "phase", "start_ms", "end_ms", "low_end_ms", "high_end_ms", "batches", "rows"]


def batch_extents(table: pd.DataFrame) -> pd.DataFrame:
    """Per batch of a timeline table: where it starts and ends (ms), from the spans it holds."""
    return table.groupby("batch").agg(start_ms=("start_ms", "min"), end_ms=("end_ms", "max")).reset_index()


def prepare_typical_batch(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (device, phase) of a timeline table: median start and end since its batch's start,
    the LOW and HIGH percentiles of the end, how many batches it ran in and its median rows. Idle rows
    are kept only for lanes idle in more than half of the batches."""
    if table.empty:
        return pd.DataFrame(columns=TYPICAL_COLUMNS)
    starts = table.groupby("batch")["start_ms"].transform("min")
    since = table.assign(start_ms=table["start_ms"] - starts, end_ms=table["end_ms"] - starts)
    grouped = since.groupby(["device", "phase"], sort=False)
    typical = grouped.agg(
        start_ms=("start_ms", "median"), end_ms=("end_ms", "median"),
        low_end_ms=("end_ms", lambda e: e.quantile(LOW / 100)), high_end_ms=("end_ms", lambda e: e.quantile(HIGH / 100)),
        batches=("batch", "nunique"), rows=("rows", "median"),
    ).reset_index()
    half = table["batch"].nunique() / 2
    return typical[(typical["phase"] != IDLE) | (typical["batches"] > half)].reset_index(drop=True)
