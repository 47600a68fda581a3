"""A DataParallel run's key figures: batches, replicas, idle devices, chunk sizes and where the time went."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dpviz.analysis.batch_facts import calls_without_chunk, chunks_per_batch, memory_peaks, phase_times
from dpviz.trace import Trace
from dpviz.trace.vocabulary import HOST
from dpviz.analysis.wording import counted, human_bytes, plural

if TYPE_CHECKING:  # for the annotations only: a DataParallel run's figures never import pandas
    pass


@dataclass(frozen=True)
class Summary:
    """The key figures of one run."""

    backend: str
    simulated: bool
    devices: int
    output_device: int
    batches: int
    rows: int
    replicas_total: int  # replicas that got rows of a batch
    replicas_per_batch: list[int]
    idle_slots: int  # (batch, device) pairs where no replica ran
    called_without_rows: int  # replicas called with the keywords alone, no rows of the batch (a failing batch's)
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
    # A replica called with no chunk (the keyword pitfall's) did no work on the batch: it is not counted
    # as busy, nor as an idle GPU (it was called), but on its own.
    empty = calls_without_chunk(trace)
    per_batch = [len(c) for c in chunks]
    devices = len(trace.lanes)
    sizes = [rows for c in chunks for rows in c]
    phases = phase_times(trace)
    return Summary(
        backend=trace.backend,
        simulated=trace.simulated,
        devices=devices,
        output_device=trace.output_device,
        batches=len(trace.batches),
        rows=sum(b.rows for b in trace.batches),
        replicas_total=sum(per_batch),
        replicas_per_batch=per_batch,
        idle_slots=sum(devices - n - e for n, e in zip(per_batch, empty)),
        called_without_rows=sum(empty),
        batches_with_idle=sum(1 for n, e in zip(per_batch, empty) if n + e < devices),
        largest_chunk=max(sizes, default=0),
        smallest_chunk=min(sizes, default=0),
        phase_total_s={p: t.total_s for p, t in phases.items()},
        phase_mean_s={p: t.mean_s for p, t in phases.items()},
        duration_s=trace.duration,
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.3f} ms"


def _short_ms(seconds: float) -> str:
    """'64.2 ms', '0.513 ms', '1,234 ms': three significant digits, what a headline needs."""
    ms = seconds * 1e3
    return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:.3g} ms"


def key_figures_dp(trace: Trace) -> dict[str, str]:
    """Six headline figures of a DataParallel run; two more when the trace has memory samples: device 0's
    memory peak, and how many times any other device's it is."""
    s = summarize(trace)
    vocabulary = trace.vocabulary
    # The engine's own time: its host phases (DataParallel's scatter, replicate, apply and gather).
    inside = sum(s.phase_total_s.get(p, 0.0) for p in vocabulary.where(HOST))
    if s.devices == 1:  # a direct call: no apply, the forward itself is the work
        inside += s.phase_total_s.get("forward", 0.0)
    lane = vocabulary.lane_noun
    # Plain words a class reads without a glossary: "replicas used 8" on 2 GPUs read as a contradiction
    # (DataParallel makes new replicas for every batch), so the count says what it counts.
    figures = {
        "batches": f"{s.batches:,}",
        f"replica calls (one per busy {lane} per batch)": f"{s.replicas_total:,}",
        f"{lane} turns left idle ({lane}s × batches)": f"{s.idle_slots:,} of {s.device_slots:,}",
        **({"replicas called with no rows": f"{s.called_without_rows:,}"} if s.called_without_rows else {}),
        f"most rows one {lane} got": plural(s.largest_chunk, "row"),
        f"fewest rows one {lane} got": plural(s.smallest_chunk, "row"),
        f"time inside {vocabulary.title}": _short_ms(inside),
    }
    peaks = memory_peaks(trace)
    if peaks is not None:  # each figure short, so no metric is cut: the ratio is a figure of its own
        first, other = peaks
        name = vocabulary.lane_name(first.device)
        figures[f"memory peak, {name}"] = human_bytes(first.bytes)
        if other is not None and other.bytes:
            figures[f"{name}'s peak over any other {lane}'s"] = f"{first.bytes / other.bytes:.1f}×"
    return figures


def summary_rows_dp(trace: Trace) -> list[tuple[str, str]]:
    """A DataParallel run's key figures in full, as (key figure, value) rows."""
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
        ("replica calls", f"{s.replicas_total:,} in total; per batch: {per_batch}"),
        ("GPU turns left idle", f"{s.idle_slots:,} of {s.device_slots:,} ({plural(s.batches_with_idle, 'batch')} with an idle GPU)"),
        ("largest chunk", plural(s.largest_chunk, "row")),
        ("smallest chunk", plural(s.smallest_chunk, "row")),
    ]
    for phase in s.phase_total_s:
        where = trace.vocabulary.phase(phase).place
        rows.append((f"time in {phase}", f"{_ms(s.phase_total_s[phase])} total, {_ms(s.phase_mean_s[phase])} mean ({where})"))
    rows.append(("run time", _ms(s.duration_s)))
    peaks = memory_peaks(trace)
    if peaks is not None:
        first, other = peaks
        how = "computed from tensor sizes" if trace.memory_kind == "computed" else "measured: torch.cuda.memory_allocated"
        text = f"GPU {first.device}: {human_bytes(first.bytes)} after {first.phase} of batch {counted(first.batch)}"
        if other is not None:
            text += f"; other GPUs at most {human_bytes(other.bytes)} (GPU {other.device}, after {other.phase})"
        rows.append(("peak memory", f"{text} ({how})"))
    return rows
