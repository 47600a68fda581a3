"""The per-batch tables every view, summary and explanation is drawn from, as plain data.

    split_table(trace)       # one row per batch and lane, idle ones included: who got which rows
    phase_table(trace)       # time per phase, in the vocabulary's pipeline order
    memory_totals(trace)     # bytes per batch, phase and lane

Data only: wording lives in dpviz.analysis.summary and dpviz.analysis.wording, drawing in dpviz.figures.
"""
from __future__ import annotations

import pandas as pd

from dpviz.analysis.batch_facts import phase_times
from dpviz.trace import Span, Trace

SPLIT_COLUMNS = ["batch", "batch_rows", "device", "replica", "used", "rows", "first_row", "last_row", "forward_ms"]
MEMORY_COLUMNS = ["batch", "phase", "device", "category", "bytes"]


def _forwards_by_slot(trace: Trace) -> dict[tuple[int, int], Span]:
    return {(s.batch, s.lane): s for s in trace.spans if s.phase == "forward" and s.lane is not None}


def _split_record(batch: int, batch_rows: int, device: int, span: Span | None) -> tuple:
    if span is None:
        return (batch, batch_rows, device, -1, False, 0, -1, -1, float("nan"))
    return (
        batch, batch_rows, device, span.replica, True, span.rows,
        span.row_offset, span.row_offset + span.rows - 1, span.duration * 1e3,
    )


def split_table(trace: Trace) -> pd.DataFrame:
    """One row per (batch, device): the slice of the batch the device got, or used=False when idle."""
    forwards = _forwards_by_slot(trace)
    records = [
        _split_record(batch.index, batch.rows, lane.id, forwards.get((batch.index, lane.id)))
        for batch in trace.batches
        for lane in trace.lanes
    ]
    return pd.DataFrame.from_records(records, columns=SPLIT_COLUMNS)


def batch_split(trace: Trace, batch: int) -> pd.DataFrame:
    """split_table for one batch only, without walking the whole trace."""
    forwards = {s.lane: s for s in trace.replicas(batch)}
    rows = trace.batches[batch].rows
    records = [_split_record(batch, rows, lane.id, forwards.get(lane.id)) for lane in trace.lanes]
    return pd.DataFrame.from_records(records, columns=SPLIT_COLUMNS)


def phase_table(trace: Trace) -> pd.DataFrame:
    """Time per phase: how many spans, total and mean seconds. Forward sums all replicas, which overlap."""
    times = phase_times(trace)
    return pd.DataFrame(
        {
            "phase": list(times),
            "spans": [t.spans for t in times.values()],
            "total_s": [t.total_s for t in times.values()],
            "mean_s": [t.mean_s for t in times.values()],
        }
    )


def memory_table(trace: Trace) -> pd.DataFrame:
    """The memory samples as a table, one row per (batch, phase, device, category), phases in pipeline order."""
    table = pd.DataFrame.from_records(
        [(m.batch, m.phase, m.lane, m.category, m.bytes) for m in trace.memory], columns=MEMORY_COLUMNS
    )
    order = trace.vocabulary.order
    table["step_index"] = [order.get(p, len(order)) for p in table["phase"]]
    return table.sort_values(["batch", "step_index", "device"], kind="stable").reset_index(drop=True)


def memory_totals(trace: Trace) -> pd.DataFrame:
    """Bytes per (batch, phase, device), summed over categories; a device that held nothing shows 0."""
    table = memory_table(trace)
    slots = table[["batch", "step_index", "phase"]].drop_duplicates()
    devices = pd.DataFrame({"device": [lane.id for lane in trace.lanes]})
    full = slots.merge(devices, how="cross")
    sums = table.groupby(["batch", "phase", "device"], as_index=False)["bytes"].sum()
    full = full.merge(sums, on=["batch", "phase", "device"], how="left").fillna({"bytes": 0})
    full["bytes"] = full["bytes"].astype("int64")
    return full.sort_values(["batch", "step_index", "device"], kind="stable").reset_index(drop=True)
