"""The per-batch tables every view, summary and explanation is drawn from, as plain data.

    split_table(trace)       # one row per batch and lane, idle ones included: who got which rows
    phase_table(trace)       # time per phase, in the vocabulary's pipeline order
    memory_totals(trace)     # bytes per batch, phase and lane; memory_peaks: how much more lane 0 holds

Data only: wording lives in dpviz.summary and dpviz.wording, drawing in dpviz.figures.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pandas as pd

from .trace import Span, Trace

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
    totals: dict[str, float] = {}
    counts: Counter[str] = Counter()
    for span in trace.spans:
        totals[span.phase] = totals.get(span.phase, 0.0) + span.duration
        counts[span.phase] += 1
    order = trace.vocabulary.order  # pipeline order: a host phase before the lane phase it launches
    phases = sorted(counts, key=lambda p: (order.get(p, len(order)), p))
    return pd.DataFrame(
        {
            "phase": phases,
            "spans": [counts[p] for p in phases],
            "total_s": [totals[p] for p in phases],
            "mean_s": [totals[p] / counts[p] for p in phases],
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


@dataclass(frozen=True)
class MemoryPeak:
    """The most one device held: how many bytes, after which phase of which batch."""

    device: int
    bytes: int
    batch: int
    phase: str


def memory_peaks(trace: Trace) -> tuple[MemoryPeak, MemoryPeak | None] | None:
    """device_ids[0]'s peak and the largest peak of any other device (None with one device),
    over the sampled batches; None when the trace has no memory samples.

    Plain Python over the samples rather than memory_totals' table: the key figures and the explanation
    both ask on every new run, and a few hundred samples add up faster than a pandas merge starts.
    """
    if not trace.memory or not trace.lanes:
        return None
    order = trace.vocabulary.order
    held: dict[tuple[int, int, str], int] = {}
    for m in trace.memory:
        slot = (m.batch, order.get(m.phase, len(order)), m.phase)
        held.setdefault(slot, 0)
        held[(*slot, m.lane)] = held.get((*slot, m.lane), 0) + m.bytes
    slots = sorted(key for key in held if len(key) == 3)  # (batch, step index, phase): pipeline order
    first = trace.lanes[0].id

    def peak(lanes: list[int]) -> MemoryPeak | None:
        # The first of equal maxima: the earliest batch and phase, then the lowest device (a device that
        # held nothing at a sampled moment counts as 0 there, as in memory_totals).
        best = None
        for batch, _, phase in slots:
            for lane in lanes:
                total = held.get((batch, _, phase, lane), 0)
                if best is None or total > best.bytes:
                    best = MemoryPeak(lane, total, batch, phase)
        return best

    return peak([first]), peak(sorted(lane.id for lane in trace.lanes if lane.id != first))
