"""Key figures of a run as plain data, and the per-batch tables every view is drawn from.

    from dpviz.summary import summarize, summary_table, split_table
    summarize(trace).idle_slots      # device slots that got no rows, over the whole run
    key_figures(trace)               # six headline figures as {label: text}, for a row of metrics
    summary_table(trace)             # all key figures as a two-column DataFrame for a page table

`split_table` (one row per batch and device, idle ones included) is the shared data preparation of
the flow, split and step views and of the explanation; `phase_table` holds the time per phase.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pandas as pd

from .trace import Span, Trace

SPLIT_COLUMNS = ["batch", "batch_rows", "device", "replica", "used", "rows", "first_row", "last_row", "forward_ms"]
# Phases in pipeline order, the device phase after the host phase that launches it.
PHASE_ORDER = ("scatter", "replicate", "apply", "forward", "gather")


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


def chunks_per_batch(trace: Trace) -> list[tuple[int, ...]]:
    """Rows per replica for every batch, in replica order: the split DataParallel made."""
    chunks: list[list[tuple[int, int]]] = [[] for _ in trace.batches]
    for span in trace.spans:
        if span.phase == "forward":
            chunks[span.batch].append((span.replica if span.replica is not None else 0, span.rows))
    return [tuple(rows for _, rows in sorted(c)) for c in chunks]


def phase_table(trace: Trace) -> pd.DataFrame:
    """Time per phase: how many spans, total and mean seconds. Forward sums all replicas, which overlap."""
    totals: dict[str, float] = {}
    counts: Counter[str] = Counter()
    for span in trace.spans:
        totals[span.phase] = totals.get(span.phase, 0.0) + span.duration
        counts[span.phase] += 1
    phases = [p for p in PHASE_ORDER if p in counts] + sorted(set(counts) - set(PHASE_ORDER))
    return pd.DataFrame(
        {
            "phase": phases,
            "spans": [counts[p] for p in phases],
            "total_s": [totals[p] for p in phases],
            "mean_s": [totals[p] / counts[p] for p in phases],
        }
    )


@dataclass(frozen=True)
class Summary:
    """The key figures of one run."""

    backend: str
    simulated: bool
    devices: int
    output_device: int
    batches: int
    rows: int
    replicas_total: int
    replicas_per_batch: list[int]
    idle_slots: int  # (batch, device) pairs that got no rows
    batches_with_idle: int
    largest_chunk: int
    smallest_chunk: int
    phase_total_s: dict[str, float]
    phase_mean_s: dict[str, float]
    duration_s: float

    @property
    def device_slots(self) -> int:
        return self.batches * self.devices


def summarize(trace: Trace) -> Summary:
    """Count batches, replicas, idle slots and chunk sizes, and time each phase."""
    chunks = chunks_per_batch(trace)
    per_batch = [len(c) for c in chunks]
    devices = len(trace.lanes)
    sizes = [rows for c in chunks for rows in c]
    phases = phase_table(trace).set_index("phase")
    return Summary(
        backend=trace.backend,
        simulated=trace.simulated,
        devices=devices,
        output_device=trace.output_device,
        batches=len(trace.batches),
        rows=sum(b.rows for b in trace.batches),
        replicas_total=sum(per_batch),
        replicas_per_batch=per_batch,
        idle_slots=sum(devices - n for n in per_batch),
        batches_with_idle=sum(1 for n in per_batch if n < devices),
        largest_chunk=max(sizes, default=0),
        smallest_chunk=min(sizes, default=0),
        phase_total_s={p: float(v) for p, v in phases["total_s"].items()},
        phase_mean_s={p: float(v) for p, v in phases["mean_s"].items()},
        duration_s=trace.duration,
    )


def plural(n: int, word: str) -> str:
    """'1 row', '4 rows', '2 batches'."""
    return f"{n:,} {word}" + ("" if n == 1 else "es" if word.endswith(("s", "ch")) else "s")


def device_list(devices: list[int]) -> str:
    """'GPU 5', 'GPUs 5 and 6', 'GPUs 3-15', 'GPUs 1, 4-7 and 9': runs of four or more as ranges."""
    runs: list[list[int]] = []
    for d in sorted(devices):
        if runs and d == runs[-1][-1] + 1:
            runs[-1].append(d)
        else:
            runs.append([d])
    parts: list[str] = []
    for run in runs:
        parts += [f"{run[0]}-{run[-1]}"] if len(run) >= 4 else [str(d) for d in run]
    if len(devices) == 1:
        return f"GPU {parts[0]}"
    if len(parts) == 1:
        return f"GPUs {parts[0]}"
    return f"GPUs {', '.join(parts[:-1])} and {parts[-1]}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.3f} ms"


def key_figures(trace: Trace) -> dict[str, str]:
    """Six headline figures, label -> short value, for a row of metrics above the views."""
    s = summarize(trace)
    inside = sum(s.phase_total_s.get(p, 0.0) for p in ("scatter", "replicate", "apply", "gather"))
    if s.devices == 1:  # a direct call: no apply, the forward itself is the work
        inside += s.phase_total_s.get("forward", 0.0)
    return {
        "batches": f"{s.batches:,}",
        "replicas used": f"{s.replicas_total:,}",
        "idle GPU slots": f"{s.idle_slots:,} of {s.device_slots:,}",
        "largest chunk": plural(s.largest_chunk, "row"),
        "smallest chunk": plural(s.smallest_chunk, "row"),
        "time in DataParallel": _ms(inside),
    }


def summary_table(trace: Trace) -> pd.DataFrame:
    """The key figures as rows of (key figure, value) text, ready for a table."""
    s = summarize(trace)
    used = Counter(s.replicas_per_batch)
    per_batch = ", ".join(
        f"{n} in {plural(count, 'batch')}" for n, count in sorted(used.items(), reverse=True)
    )
    kind = "simulated (CPU threads stand in for GPUs)" if s.simulated else f"{s.backend} (real GPUs)"
    rows: list[tuple[str, str]] = [
        ("devices", f"{plural(s.devices, 'GPU')}, {kind}"),
        ("output device", f"GPU {s.output_device}"),
        ("batches", f"{s.batches:,} ({s.rows:,} rows)"),
        ("replicas used", f"{s.replicas_total:,} in total; per batch: {per_batch}"),
        ("idle device slots", f"{s.idle_slots:,} of {s.device_slots:,} ({plural(s.batches_with_idle, 'batch')} with an idle GPU)"),
        ("largest chunk", f"{s.largest_chunk:,} rows"),
        ("smallest chunk", f"{s.smallest_chunk:,} rows"),
    ]
    for phase in s.phase_total_s:
        where = "all replicas, overlapping" if phase == "forward" else "host"
        rows.append((f"time in {phase}", f"{_ms(s.phase_total_s[phase])} total, {_ms(s.phase_mean_s[phase])} mean ({where})"))
    rows.append(("run time", _ms(s.duration_s)))
    return pd.DataFrame(rows, columns=["key figure", "value"])

