"""Time per step, said honestly: measured with its spread, and modelled for named hardware.

    summary = measured(trace)                  # median, quartiles and count over the steps after the first
    on_gpus(first_trace, second_trace)         # whether the times are of GPUs at all (not a CPU's threads)
    verdict(first_summary, second_summary)     # 0 or 1, the faster, only where the spreads do not overlap
    modelled(moves, LINKS[0])                  # seconds the busiest link needs for one step's bytes

Measured times on a CPU are the host's: threads standing in for GPUs, processes sharing the cores, a
machine that may be busy. They say nothing of GPUs, so no winner is named from them (`on_gpus`). On GPUs a
single median still flips between two runs of the same link, so a winner is named only when the middle halves
of the two engines' steps (first to third quartile) do not overlap; otherwise the page says no difference is
measurable here. The modelled time is what the bytes each device moves
would take over a named link at its peak bandwidth per direction, latency and compute left out: the same
every time for the same settings, and labelled as modelled.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from dpviz.trace import Trace

SKIPPED = ("broadcast", "rebuild", "join")  # DDP's construction and wind-down are not part of a step


@dataclass(frozen=True)
class Measured:
    """Seconds per step over `count` steps after the first (which warms up: allocations, buckets built)."""

    median: float
    low: float  # first quartile
    high: float  # third quartile
    count: int


def step_seconds(trace: Trace) -> list[float]:
    """Measured: per step, from its first span's start to its last span's end (the slowest lane's)."""
    times = []
    for batch in trace.batches:
        spans = [s for s in trace.spans_of(batch.index) if s.phase not in SKIPPED]
        times.append(max(s.end for s in spans) - min(s.start for s in spans) if spans else 0.0)
    return times


def measured(trace: Trace) -> Measured | None:
    """The steps after the first; None when there are none (a one-step run has only its warm-up)."""
    times = step_seconds(trace)[1:]
    if not times:
        return None
    if len(times) == 1:
        return Measured(times[0], times[0], times[0], 1)
    low, _, high = statistics.quantiles(times, n=4, method="inclusive")
    return Measured(statistics.median(times), low, high, len(times))


def on_gpus(*traces: Trace) -> bool:
    """Whether every run's times are of real GPUs: not threads standing in for them, not processes on a CPU."""
    return all(trace.backend == "cuda" for trace in traces)


MIN_STEPS = 5  # fewer steps after the warm-up than this say nothing about a difference


def verdict(first: Measured | None, second: Measured | None) -> int | None:
    """0 or 1, the measurably faster of two engines' steps, None when this machine cannot tell them apart."""
    if first is None or second is None or min(first.count, second.count) < MIN_STEPS:
        return None
    if first.high < second.low:
        return 0
    if second.high < first.low:
        return 1
    return None


@dataclass(frozen=True)
class Link:
    """A link between GPUs: its name as a reader knows it, bytes per second per direction at peak, and where that figure is from."""

    name: str
    bytes_per_second: float
    source: str


LINKS = (
    Link("PCIe 4.0 x16", 31.5e9, "PCI-SIG: 16 GT/s a lane, 16 lanes, 128b/130b encoding: 31.5 GB/s each way"),
    Link("NVLink (A100)", 300e9, "NVIDIA A100 datasheet: 600 GB/s of NVLink bandwidth a GPU, 300 GB/s each way"),
)


def modelled(moves: list[tuple[int, int]], link: Link) -> float:
    """Seconds for one step's transfers when every device has one such link, full duplex: the busiest
    device's larger direction decides (compute, latency and overlap left out)."""
    return max((max(sent, received) for sent, received in moves), default=0) / link.bytes_per_second
