"""Key figures of a DistributedDataParallel run: ranks, rows per rank, padding, buckets, all-reduces.

    summarize_ddp(trace)       # the numbers
    key_figures_ddp(trace)     # {label: short value} for the page's row of metrics
    summary_rows_ddp(trace)    # (key figure, value) rows for the report's table

Every number comes from the trace: the ranks' forwards (rows), the steps' sample ids (repeats), the
all-reduce spans and facts["ddp"] (the reducer's buckets). Its spec names these as its summary (dpviz.engines.ddp.spec).
"""
from __future__ import annotations

from dataclasses import dataclass

from dpviz.analysis.batch_facts import phase_times
from dpviz.engines.ddp.read.tables import bucket_layouts, collectives, computing_overlap, per_rank_batch, rank_rows, repeats_per_step, synced_steps
from dpviz.trace import Trace
from dpviz.analysis.wording import counted, human_bytes, plural


# What the share measures, in the metric's own label: the timeline draws the same spans (tables_ddp.computing_overlap).
OVERLAP_LABEL = "all-reduce during backward's compute"


@dataclass(frozen=True)
class DdpSummary:
    ranks: int
    steps: int
    rows_loaded: int  # over every rank and step, repeats included
    distinct_rows: int
    repeated: int  # rows loaded again within their epoch (the sampler's padding)
    rank_batch: int  # the most rows one rank loaded in one step
    global_batch: int  # the most rows all ranks loaded in one step
    loader_batch: int | None  # each rank's DataLoader batch_size, as the run reported it
    bucket_counts: list[tuple[int, int]]  # (first step, buckets) per recorded layout
    allreduces: int  # collectives: one per bucket per step, every rank joining it (not spans × ranks)
    allreduce_s: float  # the all-reduce spans' time, summed over the ranks
    overlap_s: float  # of that, the time while its rank's backward was still computing gradients
    synced: list[int]
    no_sync: list[int]
    peak_bytes: tuple[int, int] | None  # the least and the most any rank held at its fullest


def _peaks(trace: Trace) -> tuple[int, int] | None:
    """The least and the most any rank held at its fullest (a rank that held nothing at a sampled moment
    counts 0 there), or None without memory samples."""
    if not trace.memory:
        return None
    held: dict[tuple[int, str, int], int] = {}
    for m in trace.memory:
        held[(m.batch, m.phase, m.lane)] = held.get((m.batch, m.phase, m.lane), 0) + m.bytes
    fullest = {lane.id: 0 for lane in trace.lanes}
    for (_, _, lane), total in held.items():
        fullest[lane] = max(fullest.get(lane, 0), total)
    return min(fullest.values()), max(fullest.values())


def summarize_ddp(trace: Trace) -> DdpSummary:
    per_rank = [s.rows for b in trace.batches for s in rank_rows(trace, b.index).values()]
    per_step = [sum(s.rows for s in rank_rows(trace, b.index).values()) for b in trace.batches]
    overlap_s, allreduce_s = computing_overlap(trace)
    synced, no_sync = synced_steps(trace)
    return DdpSummary(
        ranks=len(trace.lanes),
        steps=len(trace.batches),
        rows_loaded=sum(b.rows for b in trace.batches),
        distinct_rows=len({i for b in trace.batches for i in b.sample_ids}),
        repeated=sum(repeats_per_step(trace)),
        rank_batch=max(per_rank, default=0),
        global_batch=max(per_step, default=0),
        loader_batch=per_rank_batch(trace),
        bucket_counts=[(lay["step"], len(lay.get("buckets") or [])) for lay in bucket_layouts(trace)],
        allreduces=collectives(trace),
        allreduce_s=allreduce_s,
        overlap_s=overlap_s,
        synced=synced,
        no_sync=no_sync,
        peak_bytes=_peaks(trace),
    )


def buckets_text(counts: list[tuple[int, int]]) -> str:
    """'1 in step 1, then 3 from step 2': how many buckets each recorded layout had (steps counted from 1)."""
    if not counts:
        return "not recorded"
    parts = [f"{n:,} from step {counted(step)}" if k else f"{n:,} in step {counted(step)}" if len(counts) > 1 else f"{n:,}"
             for k, (step, n) in enumerate(counts)]
    return ", then ".join(parts)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.3f} ms"


def _peak(s: DdpSummary) -> str | None:
    if s.peak_bytes is None:
        return None
    low, high = s.peak_bytes
    return f"{human_bytes(high)} on every rank" if low == high else f"{human_bytes(low)} to {human_bytes(high)}"


def key_figures_ddp(trace: Trace) -> dict[str, str]:
    """Headline figures of a DDP run, label -> short value."""
    s = summarize_ddp(trace)
    noun = trace.vocabulary.lane_noun
    figures = {
        f"{noun}s (processes)": f"{s.ranks:,}",
        "steps": f"{s.steps:,}",
        f"rows per {noun} per step": f"{s.rank_batch:,} (global {s.global_batch:,})",
        "rows loaded again": f"{s.repeated:,} (padding)" if s.repeated else "none",
    }
    if trace.config.train:  # values stay short (a metric cuts what does not fit): the words go in the labels
        counts = [n for _, n in s.bucket_counts]
        if len(counts) > 1:
            figures[f"buckets (step {counted(s.bucket_counts[0][0])}, then rebuilt)"] = ", then ".join(f"{n:,}" for n in counts[:2])
        elif counts:
            figures["gradient buckets"] = f"{counts[0]:,}"
        figures["bucket all-reduces"] = f"{s.allreduces:,}"  # collectives, each joined by every rank
        if s.no_sync:
            figures["steps under no_sync"] = f"{len(s.no_sync):,} of {s.steps:,}"
        if s.allreduce_s:
            figures[OVERLAP_LABEL] = f"{s.overlap_s / s.allreduce_s:.0%}"
    if s.peak_bytes is not None:
        low, high = s.peak_bytes
        if low == high:
            figures[f"memory peak, every {noun}"] = human_bytes(high)
        else:
            figures[f"memory peak per {noun}"] = f"{human_bytes(low)}–{human_bytes(high)}"
    return figures


def summary_rows_ddp(trace: Trace) -> list[tuple[str, str]]:
    """Every key figure of a DDP run as (key figure, value) text."""
    s = summarize_ddp(trace)
    noun = trace.vocabulary.lane_noun
    how = "one GPU each, NCCL" if trace.backend == "cuda" else "on the CPU, gloo, no GPU"
    rows = [
        ("engine", f"{trace.vocabulary.title}: {plural(s.ranks, noun)}, each its own process ({how})"),
        ("steps", f"{s.steps:,}: {s.rows_loaded:,} rows loaded, {s.distinct_rows:,} distinct dataset rows"),
        (f"rows per {noun} per step", f"up to {s.rank_batch:,}"
         + (f" (each rank's DataLoader batch_size {s.loader_batch:,})" if s.loader_batch is not None else "")),
        ("global batch", f"up to {s.global_batch:,} rows per step (all {noun}s together; batch_size {trace.config.batch_size:,})"),
        ("rows loaded again", f"{s.repeated:,} (DistributedSampler's padding)" if s.repeated else "none"),
    ]
    if trace.config.train:
        rows += [
            ("gradient buckets", buckets_text(s.bucket_counts)),
            ("bucket all-reduces", f"{s.allreduces:,} in {plural(len(s.synced), 'step')} (one per bucket per step, "
             f"every {noun} joining it), {_ms(s.allreduce_s)} summed over the {noun}s"
             + (f"; {plural(len(s.no_sync), 'step')} under no_sync, without any" if s.no_sync else "")),
            ("all-reduce beside backward", f"{_ms(s.overlap_s)} of the all-reduces' time ran while backward still "
             "computed gradients; the rest while backward only waited for them"
             + (" (processes time-sharing the CPU's cores)" if trace.backend == "cpu" else "")),
        ]
    for phase, time in phase_times(trace).items():
        known = phase in trace.vocabulary.order
        where = trace.vocabulary.phase(phase).place if known else ""
        rows.append((f"time in {phase}", f"{_ms(time.total_s)} total, {_ms(time.mean_s)} mean"
                     + (f" ({where})" if where else "")))
    rows.append(("run time", _ms(trace.duration)))
    peak = _peak(s)
    if peak:
        rows.append((f"peak memory per {noun}", f"{peak} ({'computed from tensor sizes' if trace.memory_kind == 'computed' else 'measured'})"))
    return rows
