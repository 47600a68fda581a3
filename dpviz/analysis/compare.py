"""DataParallel against DistributedDataParallel on the same settings, from the two runs' traces.

    table = traffic(trace)               # bytes each device sends and receives per step, by what moves
    rows = per_device(dp, ddp)           # per device: bytes per step, peak memory, time per step, rows seen
    sentences = comparison(dp, ddp)      # why DDP does less per step, in the runs' own numbers

Bytes that cross between devices are computed from the traces (the rows each device got, the tensors'
sizes, the parameter and gradient bytes of the memory ledger), not measured: on simulated devices and
CPU processes nothing crosses a real link. Times per step are measured; memory is measured on GPUs
and computed elsewhere. Every figure says which. No torch: a loaded trace compares too.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from dpviz.engines import ENGINES
from dpviz.analysis.step_times import LINKS, measured, modelled, step_seconds, verdict  # noqa: F401  step_seconds named here too
from dpviz.trace import Trace
from dpviz.analysis.wording import bytes_alike

FLOAT_BYTES = 4  # dpviz's models run in float32


@dataclass(frozen=True)
class Move:
    """Bytes one device sends and receives in one step for one reason."""

    step: int
    lane: int
    what: str  # "input chunk", "parameter copy", "output gathered", "output gradient", "gradient sum", "all-reduce", "buffers"
    sent: int
    received: int


def row_bytes(shape: list[int], rows: int) -> int:
    return math.prod(shape) // rows * FLOAT_BYTES if rows and shape else 0


def ledger(trace: Trace, lane: int, *categories: str) -> int | None:
    """The largest figure the memory ledger holds for `categories` on `lane` (computed traces only)."""
    sizes = [m.bytes for m in trace.memory if m.lane == lane and m.category in categories]
    return max(sizes) if sizes else None


def model_bytes(trace: Trace) -> tuple[int | None, int | None]:
    """(parameters and buffers, gradients) of the model, from the trace's computed memory ledger."""
    return trace.spec.part("model_bytes")(trace)


def traffic(trace: Trace) -> list[Move]:
    """Every device's traffic, step by step (DataParallel's batches are its steps), as its engine moves it."""
    return trace.spec.part("traffic")(trace)


@dataclass(frozen=True)
class DeviceFigures:
    """One device (a GPU of DataParallel, a rank of DDP) of one run, per step on average."""

    engine: str
    lane: int
    name: str
    bytes_per_step: int  # sent + received, computed
    peak_memory: int | None  # measured on GPUs, computed elsewhere
    memory_kind: str
    rows: int  # rows its forwards handled over the run (padding rows included)
    distinct_rows: int


def per_device(trace: Trace) -> list[DeviceFigures]:
    moved: dict[int, int] = defaultdict(int)
    for move in traffic(trace):
        moved[move.lane] += move.sent + move.received
    steps = max(1, len(trace.batches))
    figures = []
    for lane in trace.lanes:
        rows = [row for s in trace.spans if s.phase == "forward" and s.lane == lane.id for row in trace.sample_ids(s)]
        peak = max((sum(m.bytes for m in trace.memory if m.lane == lane.id and m.batch == b and m.phase == p)
                    for b, p in {(m.batch, m.phase) for m in trace.memory}), default=None)
        figures.append(DeviceFigures(trace.engine, lane.id, trace.vocabulary.lane_name(lane.id),
                                     moved[lane.id] // steps, peak, trace.memory_kind, len(rows), len(set(rows))))
    return figures


def _rows_seen(trace: Trace) -> str:
    """'100 rows (100 distinct)' or '102 rows (100 distinct: 2 loaded twice, the sampler's padding)'."""
    rows = [row for span in trace.spans if span.phase == "forward" for row in trace.sample_ids(span)]
    distinct = len(set(rows))
    extra = "" if distinct == len(rows) else f": {len(rows) - distinct:,} loaded again"
    return f"{len(rows):,} rows ({distinct:,} distinct{extra})"


def comparison(dp: Trace, ddp: Trace) -> list[str]:
    """Plain sentences, every number from the two runs."""
    a, b = per_device(dp), per_device(ddp)
    sentences = []
    if a and b:
        first = a[0]
        others = [f.bytes_per_step for f in a[1:]]
        most_ddp = max(f.bytes_per_step for f in b)
        even = len({f.bytes_per_step for f in b}) == 1
        # One unit for the three, so they compare at a glance.
        through, other, ddp_most = bytes_alike(first.bytes_per_step, max(others, default=0), most_ddp)
        sentences.append(
            f"Per step, DataParallel moves {through} through {first.name} (computed): it "
            f"sends every other device its chunk of the batch and a fresh copy of the model, and takes back every "
            f"output{' and every gradient' if dp.config.train else ''}; the others move "
            f"{other if others else 'nothing'} each. DDP moves at most {ddp_most} "
            f"per rank, {'the same on every rank' if even else 'about the same on every rank (rank 0 also sends its buffers)'}: "
            f"no scatter, no replicate, no gather{', only the gradients all-reduced' if ddp.config.train else ''}.")
    sentences += times_sentences(dp, ddp)
    if a and b:
        sentences.append(
            f"Rows: DataParallel's devices handled {_rows_seen(dp)} in contiguous slices of each batch; DDP's ranks "
            f"loaded {_rows_seen(ddp)}, each rank its own strided shard of the dataset.")
    peaks_dp = [f.peak_memory for f in a if f.peak_memory is not None]
    peaks_ddp = [f.peak_memory for f in b if f.peak_memory is not None]
    if peaks_dp and peaks_ddp:
        top, least, low, high = bytes_alike(peaks_dp[0], min(peaks_dp), min(peaks_ddp), max(peaks_ddp))
        ranks = f"peak {'at ' if low == high else ''}{high if low == high else f'between {low} and {high}'}"
        sentences.append(
            f"Memory ({dp.memory_kind} for DataParallel, {ddp.memory_kind} for DDP): DataParallel's {a[0].name} peaks "
            f"at {top} against {least} on its least loaded device; DDP's ranks {ranks}.")
    return sentences


def moves_per_step(trace: Trace) -> list[tuple[int, int]]:
    """(sent, received) bytes per lane in an average step of the run (computed, as traffic())."""
    sent: dict[int, int] = defaultdict(int)
    received: dict[int, int] = defaultdict(int)
    for move in traffic(trace):
        sent[move.lane] += move.sent
        received[move.lane] += move.received
    steps = max(1, len(trace.batches))
    return [(sent[lane.id] // steps, received[lane.id] // steps) for lane in trace.lanes]


def _ms(seconds: float, largest: float | None = None) -> str:
    """A time in µs or ms, the unit chosen by `largest` (the largest time it is read beside) when given."""
    scale = seconds if largest is None else largest
    if scale < 1e-4:
        return f"{seconds * 1e6:.1f} µs"
    return f"{seconds * 1e3:.2f} ms" if scale < 0.01 else f"{seconds * 1e3:.1f} ms"


def times_sentences(dp: Trace, ddp: Trace) -> list[str]:
    """The measured time per step with its spread, what this machine can tell from it, and the time the
    bytes would take on named links (modelled, the same on every reload)."""
    sentences = []
    a, b = measured(dp), measured(ddp)
    if a is not None and b is not None:
        most = max(a.high, b.high)  # both engines' times in one unit
        where = lambda t, m: (f"{_ms(m.median, most)} (middle half {_ms(m.low, most)} to {_ms(m.high, most)}, "
                              f"{m.count} step{'s' if m.count != 1 else ''} after the first)")
        hosts = (f"{'threads standing in for GPUs' if dp.simulated else 'real GPUs'} against "
                 f"{'processes sharing the CPU' if ddp.backend == 'cpu' else 'one process per GPU'}")
        faster = verdict(a, b)
        if faster is None:
            tell = ("The two spreads overlap, so on this machine no difference between them is measurable: a "
                    "reload may put either ahead.")
        else:
            name = ENGINES[faster].short
            tell = (f"{name}'s middle half of steps lies wholly below the other's: measurably faster on this "
                    "machine.")
        sentences.append(f"Measured time per step ({hosts}): DataParallel {where(dp, a)}, DDP {where(ddp, b)}. {tell}")
    dp_moves, ddp_moves = moves_per_step(dp), moves_per_step(ddp)
    if any(sum(m) for m in dp_moves + ddp_moves):
        parts = []
        for link in LINKS:
            pair = modelled(dp_moves, link), modelled(ddp_moves, link)
            parts.append(f"over {link.name}, {_ms(pair[0], max(pair))} with DataParallel and "
                         f"{_ms(pair[1], max(pair))} with DDP")
        sentences.append(
            f"Modelled for {len(dp.lanes)} GPUs, each with a link of its own (the bytes above at the link's peak "
            f"bandwidth each way; compute and latency left out), one step's transfers take {'; '.join(parts)}. The "
            "busiest device decides: DataParallel's GPU 0, through which every chunk, copy and output passes.")
    return sentences
