"""The per-step tables a DistributedDataParallel trace is drawn and explained from, as plain data.

    epoch_of(trace, step)          # which epoch a step belongs to (DistributedSampler restarts each one)
    repeated_rows(trace)           # per step, per rank: which of its rows repeat a row seen earlier that epoch
    bucket_layout(trace, step)     # the buckets in effect in a step: index, parameter names, bytes
    allreduce_table(trace)         # one row per all-reduce: step, rank, bucket, times, its backward's end
    computing_overlap(trace)       # all-reduce time while backward still computed, as the timeline draws it
    collectives(trace)             # bucket all-reduces as collectives: one per bucket per step, every rank in it

Everything comes from the trace: the spans, the steps' rows and facts["ddp"] (what the reducer
reported). A file's facts may lack what a run records (an older file); readers then get empty
tables, never an error. Data only: wording lives in dpviz.engines.ddp.read.summary and dpviz.engines.ddp.read.explain.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from dpviz.trace import Span, Trace

if TYPE_CHECKING:  # the annotation only: a DDP run's key figures and explanations never import pandas
    import pandas as pd

ALLREDUCE_COLUMNS = ["step", "rank", "bucket", "start", "end", "backward_start", "backward_end", "overlap"]


def epochs_of(trace: Trace) -> int:
    """Epochs the run went through (1 for a trace written before DDP could run several)."""
    epochs = getattr(trace.config, "epochs", 1)
    return epochs if isinstance(epochs, int) and epochs >= 1 else 1


def steps_per_epoch(trace: Trace) -> int:
    return max(1, trace.config.num_batches // epochs_of(trace))


def epoch_of(trace: Trace, step: int) -> int:
    return step // steps_per_epoch(trace)


def rank_rows(trace: Trace, step: int) -> dict[int, Span]:
    """Each rank's forward of one step, by rank: its rows are the step's row_offset .. + rows."""
    return {s.lane: s for s in trace.spans_of(step, "forward") if s.lane is not None}


def sampler_order(trace: Trace, step: int) -> list[tuple[int, int]]:
    """(rank, position in the step's sample_ids) of every row of a step, in the order DistributedSampler
    dealt them: its list L gives rank r the indices L[r], L[r + W], ..., so one step's rows are, in L's
    order, rank 0's first row, rank 1's first row, ..., then every rank's second row. When the ranks
    hold different numbers of rows (data split by hand, no sampler), rank after rank."""
    forwards = rank_rows(trace, step)
    ranks = sorted(forwards)
    counts = {forwards[r].rows for r in ranks}
    if len(counts) != 1:
        return [(r, forwards[r].row_offset + j) for r in ranks for j in range(forwards[r].rows)]
    (rows,) = counts
    return [(r, forwards[r].row_offset + j) for j in range(rows) for r in ranks]


def repeated_rows(trace: Trace) -> list[dict[int, list[bool]]]:
    """Per step, per rank, one flag per row of its slice: True when that dataset row was already loaded
    earlier in the same epoch (DistributedSampler's padding, which repeats the start of its list so
    that every rank gets as many rows)."""
    out: list[dict[int, list[bool]]] = []
    seen: set[int] = set()
    epoch, per = -1, steps_per_epoch(trace)  # once: the step count is worked out from the whole sampler's plan
    for batch in trace.batches:
        if batch.index // per != epoch:
            epoch, seen = batch.index // per, set()
        forwards = rank_rows(trace, batch.index)
        flags = {r: [False] * s.rows for r, s in forwards.items()}
        for rank, position in sampler_order(trace, batch.index):
            if position >= len(batch.sample_ids):
                continue
            row = batch.sample_ids[position]
            if row in seen:
                flags[rank][position - forwards[rank].row_offset] = True
            seen.add(row)
        out.append(flags)
    return out


def repeats_per_step(trace: Trace) -> list[int]:
    """How many rows of each step repeat a row loaded earlier in its epoch."""
    return [sum(sum(f) for f in flags.values()) for flags in repeated_rows(trace)]


def _ddp_facts(trace: Trace) -> dict[str, Any]:
    facts = trace.facts.get("ddp")
    return facts if isinstance(facts, dict) else {}


def bucket_layouts(trace: Trace) -> list[dict[str, Any]]:
    """The recorded layouts, in step order: {"step": first step it applies to, "buckets": [...]}."""
    layouts = _ddp_facts(trace).get("buckets") or []
    return sorted((lay for lay in layouts if isinstance(lay, dict) and "step" in lay), key=lambda lay: lay["step"])


def bucket_layout(trace: Trace, step: int) -> list[dict[str, Any]]:
    """The buckets in effect in `step` ({"index", "params", "bytes"} each); empty when the file has none."""
    current: list[dict[str, Any]] = []
    for layout in bucket_layouts(trace):
        if layout["step"] <= step:
            current = layout.get("buckets") or []
    return current


def per_rank_batch(trace: Trace) -> int | None:
    """Each rank's DataLoader batch_size, as the run reported it (None when the file does not say)."""
    value = _ddp_facts(trace).get("per_rank_batch")
    return value if isinstance(value, int) else None


class AllReduce(NamedTuple):
    """One bucket all-reduce: its step, rank and bucket, its start and end (seconds), its rank's backward in
    that step (NaN when there was none), and how long the two ran at the same time (seconds)."""

    step: int
    rank: int
    bucket: int | None
    start: float
    end: float
    backward_start: float
    backward_end: float
    overlap: float


def allreduces(trace: Trace) -> list[AllReduce]:
    """Every bucket all-reduce of the run, in the trace's order."""
    backwards = {(s.batch, s.lane): s for s in trace.spans if s.phase == "backward"}
    records = []
    for span in trace.spans:
        if span.phase != "allreduce":
            continue
        back = backwards.get((span.batch, span.lane))
        b_start, b_end = (back.start, back.end) if back else (float("nan"), float("nan"))
        overlap = max(0.0, min(span.end, b_end) - max(span.start, b_start)) if back else 0.0
        records.append(AllReduce(span.batch, span.lane, span.group, span.start, span.end, b_start, b_end, overlap))
    return records


def allreduce_table(trace: Trace) -> "pd.DataFrame":
    """allreduces() as a table, one row per bucket all-reduce."""
    import pandas as pd

    return pd.DataFrame.from_records(allreduces(trace), columns=ALLREDUCE_COLUMNS)


def under_no_sync(trace: Trace, step: int) -> bool:
    """Whether `step` ran under ddp.no_sync(): gradient accumulation's steps before the one that all-reduces."""
    accumulate, last = trace.config.accumulate, trace.config.num_batches - 1
    return trace.config.train and accumulate > 1 and bool((step + 1) % accumulate) and step != last


def synced_steps(trace: Trace) -> tuple[list[int], list[int]]:
    """The steps with an all-reduce, and the training steps under no_sync (accumulating, so without one)."""
    with_allreduce = sorted({s.batch for s in trace.spans if s.phase == "allreduce"})
    backward = sorted({s.batch for s in trace.spans if s.phase == "backward"})
    return with_allreduce, [b for b in backward if b not in set(with_allreduce) and under_no_sync(trace, b)]


def unreduced_steps(trace: Trace) -> list[int]:
    """Training steps outside no_sync whose backward all-reduced nothing: a bucket is all-reduced only when
    every one of its parameters got a gradient, so a parameter forward never used keeps its bucket waiting."""
    with_allreduce = {s.batch for s in trace.spans if s.phase == "allreduce"}
    backward = sorted({s.batch for s in trace.spans if s.phase == "backward"})
    return [b for b in backward if b not in with_allreduce and not under_no_sync(trace, b)]


class Backward(NamedTuple):
    """One rank's backward in one step: when it began, until when it computed gradients, when it returned
    (seconds). A bucket's all-reduce is launched once its gradients are ready, in index order, so after
    the step's last launch backward has made every gradient and only waits for the all-reduces to finish
    (the reducer's finalize_backward); without a launch inside it, it computed to its end."""

    step: int
    rank: int
    start: float
    computed_until: float
    end: float


def backwards(trace: Trace, steps: range | None = None) -> list[Backward]:
    """Every rank's backward of `steps` (default: the run's), with where its computing ends."""
    last: dict[tuple[int, int], float] = {}
    for span in trace.spans:
        if span.phase == "allreduce" and span.lane is not None:
            key = (span.batch, span.lane)
            last[key] = max(last.get(key, span.start), span.start)
    out = []
    for span in trace.spans:
        if span.phase != "backward" or span.lane is None or (steps is not None and span.batch not in steps):
            continue
        launched = last.get((span.batch, span.lane))
        until = launched if launched is not None and span.start <= launched < span.end else span.end
        out.append(Backward(span.batch, span.lane, span.start, until, span.end))
    return out


def computing_overlap(trace: Trace, steps: range | None = None) -> tuple[float, float]:
    """(seconds of bucket all-reduce that ran while its rank's backward still computed gradients, seconds of
    bucket all-reduce in all) over `steps` (default: the run's). Each all-reduce counts the part of it inside
    [backward start, computed_until] of its rank's backward in its step: the timeline draws the backward's
    bar over that stretch and its wait after it, and the all-reduces under it, from these same spans."""
    computing = {(b.step, b.rank): (b.start, b.computed_until) for b in backwards(trace, steps)}
    overlap = total = 0.0
    for span in trace.spans:
        if span.phase != "allreduce" or (steps is not None and span.batch not in steps):
            continue
        total += span.end - span.start
        window = computing.get((span.batch, span.lane))
        if window is not None:
            overlap += max(0.0, min(span.end, window[1]) - max(span.start, window[0]))
    return overlap, total


def collectives(trace: Trace) -> int:
    """Bucket all-reduces counted as collectives: one per bucket per step, which every rank joins (its
    spans on the ranks are the same collective, seen from each process). Per step, the most all-reduce
    spans any one rank recorded."""
    per_rank: dict[tuple[int, int | None], int] = {}
    for span in trace.spans:
        if span.phase == "allreduce":
            per_rank[(span.batch, span.lane)] = per_rank.get((span.batch, span.lane), 0) + 1
    per_step: dict[int, int] = {}
    for (step, _), count in per_rank.items():
        per_step[step] = max(per_step.get(step, 0), count)
    return sum(per_step.values())
