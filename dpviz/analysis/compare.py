"""DataParallel against DistributedDataParallel on the same settings, from the two runs' traces.

    table = traffic(trace)               # bytes each device sends and receives per step, by what moves
    rows = per_device(trace)             # per device: bytes it sends per step, peak memory, rows seen
    sentences = comparison(dp, ddp)      # why DDP does less per step, in the runs' own numbers

Bytes that cross between devices are computed from the traces (the rows each device got, the tensors'
sizes, the parameter and gradient bytes of the memory ledger), not measured: on simulated devices and
CPU processes nothing crosses a real link. A device's bytes per step are the bytes it sends, the one count
every figure uses (the Compare figure's bars, the Memory page's diamonds: dpviz.analysis.memory_compare). Times
per step are measured, each with its spread and beside the time the same bytes would take on real links
(modelled); memory is measured on GPUs and computed elsewhere. Every figure says which. No torch: a loaded
trace compares too.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from dpviz.engines import ENGINES
from dpviz.analysis.hub_lesson import hub_lesson
from dpviz.analysis.step_times import LINKS, measured, modelled, on_gpus, step_seconds, verdict  # noqa: F401  step_seconds named here too
from dpviz.trace import Trace
# the sizes a step's traffic is made of live with the formulas; the engines' readers read them from here too
from dpviz.analysis.traffic_model import FLOAT_BYTES, model_bytes, row_bytes  # noqa: F401
from dpviz.analysis.wording import bytes_alike


@dataclass(frozen=True)
class Move:
    """Bytes one device sends and receives in one step for one reason."""

    step: int
    lane: int
    what: str  # "input chunk", "parameter copy", "output gathered", "output gradient", "gradient sum", "all-reduce", "buffers"
    sent: int
    received: int


def ledger(trace: Trace, lane: int, *categories: str) -> int | None:
    """The largest figure the memory ledger holds for `categories` on `lane` (computed traces only)."""
    sizes = [m.bytes for m in trace.memory if m.lane == lane and m.category in categories]
    return max(sizes) if sizes else None


def traffic(trace: Trace) -> list[Move]:
    """Every device's traffic, step by step (DataParallel's batches are its steps), as its engine moves it."""
    return trace.spec.part("traffic")(trace)


@dataclass(frozen=True)
class DeviceFigures:
    """One device (a GPU of DataParallel, a rank of DDP) of one run, per step on average."""

    engine: str
    lane: int
    name: str
    bytes_per_step: int  # sent per step, computed
    peak_memory: int | None  # measured on GPUs, computed elsewhere
    memory_kind: str
    rows: int  # rows its forwards handled over the run (padding rows included)
    distinct_rows: int


def per_device(trace: Trace) -> list[DeviceFigures]:
    moved = {lane: sent for lane, (sent, _) in zip((lane.id for lane in trace.lanes), moves_per_step(trace))}
    figures = []
    for lane in trace.lanes:
        rows = [row for s in trace.spans if s.phase == "forward" and s.lane == lane.id for row in trace.sample_ids(s)]
        peak = max((sum(m.bytes for m in trace.memory if m.lane == lane.id and m.batch == b and m.phase == p)
                    for b, p in {(m.batch, m.phase) for m in trace.memory}), default=None)
        figures.append(DeviceFigures(trace.engine, lane.id, trace.vocabulary.lane_name(lane.id),
                                     moved[lane.id], peak, trace.memory_kind, len(rows), len(set(rows))))
    return figures


def _rows_seen(trace: Trace) -> str:
    """'100 rows (100 distinct)' or '102 rows (100 distinct: 2 loaded twice, the sampler's padding)'."""
    rows = [row for span in trace.spans if span.phase == "forward" for row in trace.sample_ids(span)]
    distinct = len(set(rows))
    extra = "" if distinct == len(rows) else f": {len(rows) - distinct:,} loaded again"
    return f"{len(rows):,} rows ({distinct:,} distinct{extra})"


def comparison(dp: Trace, ddp: Trace) -> list[str]:
    """Plain sentences, every number from the two runs; first, when these settings cannot show GPU 0 as the hub,
    what would (the Compare figure's title says it too, from the same hub_lesson)."""
    a, b = per_device(dp), per_device(ddp)
    lesson = hub_lesson(dp, ddp)
    sentences = [] if lesson.shows else [
        f"These settings cannot show {dp.vocabulary.lane_name(dp.lanes[0].id)} as the hub ({lesson.why}). {lesson.sentence}"]
    if a and b:
        first = a[0]
        others = [f.bytes_per_step for f in a[1:]]
        most_ddp = max(f.bytes_per_step for f in b)
        even = len({f.bytes_per_step for f in b}) == 1
        # One unit for the three, so they compare at a glance.
        through, other, ddp_most = bytes_alike(first.bytes_per_step, max(others, default=0), most_ddp)
        train = dp.config.train
        back = (f"{other} each, back to {first.name} (their outputs{' and gradients' if train else ''})" if others
                else "nothing")
        ranks = (f"A DDP rank sends at most {ddp_most}, "
                 f"{'the same on every rank' if even else 'about the same on every rank (rank 0 also sends its buffers)'}"
                 if most_ddp else "DDP's ranks send nothing")
        sentences.append(
            f"Per step, DataParallel's {first.name} sends {through} (computed): every other device its chunk of the "
            f"batch and a fresh copy of the model{', and the gradient of each output' if train else ''}; the others "
            f"send {back}. {ranks}: no scatter, no replicate, no gather"
            f"{', only its share of the gradients all-reduced' if ddp.config.train else ''}.")
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


def sent_per_step(trace: Trace) -> list[float]:
    """Bytes each lane sends in an average step of the run (computed, as traffic()): what the Compare figure's bars
    and the Memory page's diamonds of DataParallel and DDP both count."""
    sent: dict[int, int] = defaultdict(int)
    for move in traffic(trace):
        sent[move.lane] += move.sent
    steps = max(1, len(trace.batches))
    return [sent[lane.id] / steps for lane in trace.lanes]


def _ms(seconds: float, largest: float | None = None) -> str:
    """A time in ns, µs or ms, the unit chosen by `largest` (the largest time it is read beside) when given."""
    scale = seconds if largest is None else largest
    if scale < 1e-6:
        return f"{seconds * 1e9:.1f} ns"
    if scale < 1e-4:
        return f"{seconds * 1e6:.1f} µs"
    return f"{seconds * 1e3:.2f} ms" if scale < 0.01 else f"{seconds * 1e3:.1f} ms"


def modelled_times(dp: Trace, ddp: Trace) -> list[str | None] | None:
    """Per engine (DataParallel's, DDP's), its time for one step's transfers over each of LINKS, each link's pair
    in one unit: "0.24 ms over PCIe 4.0 x16, 25.3 µs over NVLink (A100)", None for an engine that sends nothing;
    None when nothing crosses between devices in either run. The same on every reload: bytes over bandwidth."""
    dp_moves, ddp_moves = moves_per_step(dp), moves_per_step(ddp)
    if not any(sum(m) for m in dp_moves + ddp_moves):
        return None
    pairs = [(modelled(dp_moves, link), modelled(ddp_moves, link)) for link in LINKS]
    return [", ".join(f"{_ms(pair[i], max(pair))} over {link.name}" for link, pair in zip(LINKS, pairs))
            if any(pair[i] for pair in pairs) else None for i in (0, 1)]


def times_sentences(dp: Trace, ddp: Trace) -> list[str]:
    """Each engine's time per step: measured, with its spread, beside the time its bytes would take on real links
    (modelled), then what each of the two can tell. On a CPU the measured times are the host's threads and
    processes, not GPUs: no engine is called faster from them."""
    a, b = measured(dp), measured(ddp)
    model = modelled_times(dp, ddp)
    if a is None and b is None and model is None:
        return []
    most = max((m.high for m in (a, b) if m is not None), default=0)  # both engines' measured times in one unit

    def clause(name: str, m, modelled_text: str | None) -> str:
        said = (f"measured {_ms(m.median, most)} (the median of {m.count} step{'s' if m.count != 1 else ''} after the "
                f"first; middle half {_ms(m.low, most)} to {_ms(m.high, most)})" if m is not None
                else "not measured (one step, a warm-up, only)")
        return f"{name}: {said}, modelled {modelled_text}" if modelled_text else \
            f"{name}: {said}, sends nothing, so no transfer time is modelled"

    engines = [clause("DataParallel", a, model[0] if model else None), clause("DDP", b, model[1] if model else None)]
    if on_gpus(dp, ddp):
        faster = verdict(a, b)
        told = ("Measured on these GPUs: " + (f"{ENGINES[faster].short}'s middle half of steps lies wholly below the "
                                              "other's, measurably faster here." if faster else
                                              "the spreads overlap, so no difference is measurable here."))
    else:
        hosts = ([] if on_gpus(dp) else ["DataParallel's GPUs are threads"]) + \
            ([] if on_gpus(ddp) else ["DDP's ranks are processes sharing the cores"])
        told = (f"Measured on this machine's CPU, not on GPUs ({', '.join(hosts)}): these times call neither engine "
                "faster on GPUs.")
    sentences = [f"Time per step. {'. '.join(engines)}. {told}"]
    if model is not None:
        sentences.append(
            f"Modelled: one step's transfers on {len(dp.lanes)} GPUs, each with a link of its own, at the link's "
            "peak bandwidth each way (compute and latency left out). The busiest device decides: DataParallel's "
            f"{dp.vocabulary.lane_name(dp.lanes[0].id)}, through which every chunk, copy and output passes.")
    return sentences
