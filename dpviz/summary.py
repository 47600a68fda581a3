"""Key figures of a run as plain data, and the per-batch tables every view is drawn from.

    from dpviz.summary import summarize, summary_table, split_table
    summarize(trace).idle_slots      # device slots that got no rows, over the whole run
    key_figures(trace)               # six headline figures (seven with memory) as {label: text}, for a row of metrics
    summary_table(trace)             # all key figures as a two-column DataFrame for a page table

`split_table` (one row per batch and device, idle ones included) is the shared data preparation of
the flow, split and step views and of the explanation; `phase_table` holds the time per phase;
`memory_totals` and `memory_peaks` read the memory samples (how much more device 0 holds).
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


def batch_spans(trace: Trace, batch: int, phase: str) -> list[Span]:
    """The spans of one phase of one batch, in replica order (lane order for spans without a replica)."""
    spans = trace.spans_of(batch, phase)
    return sorted(spans, key=lambda s: (-1 if s.replica is None else s.replica, -1 if s.lane is None else s.lane))


def chunks_per_batch(trace: Trace) -> list[tuple[int, ...]]:
    """Rows per replica for every batch, in replica order: the split DataParallel made."""
    chunks: list[list[tuple[int, int]]] = [[] for _ in trace.batches]
    for span in trace.spans:
        # A replica handed no tensor at all (a failing batch's padding) got no chunk of the batch.
        if span.phase == "forward" and not (span.input_shape is None and trace.failure is not None):
            chunks[span.batch].append((span.replica if span.replica is not None else 0, span.rows))
    return [tuple(rows for _, rows in sorted(c)) for c in chunks]


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


def memory_batches(trace: Trace) -> list[int]:
    """The batches memory was sampled for (the first and the last), in order."""
    return sorted({m.batch for m in trace.memory})


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
    over the sampled batches; None when the trace has no memory samples."""
    if not trace.memory or not trace.lanes:
        return None
    totals = memory_totals(trace)
    first = trace.lanes[0].id

    def peak(part: pd.DataFrame) -> MemoryPeak:
        row = part.loc[part["bytes"].idxmax()]  # the first of equal maxima: earliest batch and phase, lowest device
        return MemoryPeak(int(row["device"]), int(row["bytes"]), int(row["batch"]), str(row["phase"]))

    others = totals[totals["device"] != first]
    return peak(totals[totals["device"] == first]), (peak(others) if len(others) else None)


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


def sizes_text(sizes) -> str:
    """'4, 4, 2': chunk sizes as the explanations list them."""
    return ", ".join(str(s) for s in sizes)


def human_bytes(n: float) -> str:
    """'560 B', '1.23 KiB', '45.6 MiB', '1,000 KiB': binary units, three significant digits."""
    value, unit = float(n), "B"
    for bigger in ("KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1023.5:  # what would print as "1,024" takes the next unit
            break
        value, unit = value / 1024, bigger
    if unit == "B":
        return f"{int(round(value)):,} B"
    digits = 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
    return f"{value:,.{digits}f} {unit}"


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
    """Six headline figures, label -> short value, for a row of metrics above the views; a seventh,
    device 0's memory peak against the next device's, when the trace has memory samples."""
    s = summarize(trace)
    inside = sum(s.phase_total_s.get(p, 0.0) for p in ("scatter", "replicate", "apply", "gather"))
    if s.devices == 1:  # a direct call: no apply, the forward itself is the work
        inside += s.phase_total_s.get("forward", 0.0)
    figures = {
        "batches": f"{s.batches:,}",
        "replicas used": f"{s.replicas_total:,}",
        "idle GPU slots": f"{s.idle_slots:,} of {s.device_slots:,}",
        "largest chunk": plural(s.largest_chunk, "row"),
        "smallest chunk": plural(s.smallest_chunk, "row"),
        "time in DataParallel": _ms(inside),
    }
    peaks = memory_peaks(trace)
    if peaks is not None:
        first, other = peaks
        label = f"GPU {first.device} memory peak"
        if other is not None and other.bytes:  # the ratio goes in the label: values must stay short
            label += f" ({first.bytes / other.bytes:.1f}× next)"
        figures[label] = human_bytes(first.bytes)
    return figures


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
        where = trace.vocabulary.phase(phase).place
        rows.append((f"time in {phase}", f"{_ms(s.phase_total_s[phase])} total, {_ms(s.phase_mean_s[phase])} mean ({where})"))
    rows.append(("run time", _ms(s.duration_s)))
    peaks = memory_peaks(trace)
    if peaks is not None:
        first, other = peaks
        how = "computed from tensor sizes" if trace.memory_kind == "computed" else "measured: torch.cuda.memory_allocated"
        text = f"GPU {first.device}: {human_bytes(first.bytes)} after {first.phase} of batch {first.batch:,}"
        if other is not None:
            text += f"; other GPUs at most {human_bytes(other.bytes)} (GPU {other.device}, after {other.phase})"
        rows.append(("peak memory", f"{text} ({how})"))
    return pd.DataFrame(rows, columns=["key figure", "value"])

