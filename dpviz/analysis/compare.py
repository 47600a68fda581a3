"""Any two engines on the same settings, from the two runs' traces: what each device sends per step, by kind,
how long a step took and would take on real links, which rows each device handled, what it holds.

    rows = per_device(trace)             # per device: bytes it sends per step, peak memory, rows seen
    sentences = comparison(a, b)         # the two runs side by side, in their own numbers
    lesson = lessons(a, b)               # what an engine is compared for, where these settings cannot show it

Generic over engines, as HolisticTraceAnalysis's TraceDiff is over traces: everything that differs comes from
each engine's spec (its label, lane noun and unit, its traffic by kind, its own `compare_lesson` where it has
one). Bytes that cross between devices are computed from the traces (dpviz.analysis.traffic), not measured: on
simulated devices and CPU processes nothing crosses a real link. Times per step are measured, each with its
spread and beside the time the same bytes would take on real links (modelled); memory is measured on GPUs and
computed elsewhere. Every figure says which. No torch: a loaded trace compares too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from dpviz.analysis.step_times import LINKS, measured, modelled, on_gpus, step_seconds, verdict  # noqa: F401  step_seconds named here too
# the sizes a step's traffic is made of live with the formulas; the engines' readers read them from here too
from dpviz.analysis.traffic import Move, counted_step, evened, moves_per_step, sent_by_kind, sent_per_step, traffic  # noqa: F401
from dpviz.analysis.traffic_model import FLOAT_BYTES, model_bytes, row_bytes  # noqa: F401
from dpviz.analysis.wording import bytes_alike, with_article
from dpviz.trace import Trace


HEADLINE_STEP = "In one whole step"  # what a headline compares: each engine's bytes in one whole step (counted_step)


@dataclass(frozen=True)
class Lesson:
    """Whether a comparison's settings show what an engine is compared for; when not, why, what to change and what
    that shows (an engine's `compare_lesson` part returns one)."""

    shows: bool
    why: str = ""  # what in the settings hides it
    change: str = ""  # what to change, computed from the settings: "turn on training and use 3 GPUs"
    sees: str = ""  # what the changed settings show
    cannot: str = ""  # what these settings cannot do: "show GPU 0 as the hub"

    @property
    def sentence(self) -> str:
        return f"{self.change[:1].upper()}{self.change[1:]} to see {self.sees}." if self.change else ""


def lessons(a: Trace, b: Trace) -> list[Lesson]:
    """The lessons of the two engines that have one and whose settings here cannot show it."""
    found = []
    for trace, other in ((a, b), (b, a)):
        if trace.spec.has("compare_lesson"):
            lesson = trace.spec.part("compare_lesson")(trace, other)
            if not lesson.shows:
                found.append(lesson)
    return found


@dataclass(frozen=True)
class DeviceFigures:
    """One device (a GPU of DataParallel, a rank, a stage) of one run, per step on average."""

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


def busiest(trace: Trace) -> tuple[str, float]:
    """Who sends the most per step, in words that stand in a sentence ("DataParallel's GPU 0", "a DDP rank" where
    every rank sends alike), and how much."""
    sent = sent_per_step(trace)
    if not sent:
        return f"{trace.spec.short}'s {trace.vocabulary.lane_noun}s", 0.0
    most = max(sent)
    if len(sent) > 1 and min(sent) == most:
        return with_article(f"{trace.spec.short} {trace.vocabulary.lane_noun}"), most
    lane = trace.lanes[sent.index(most)].id
    return f"{trace.spec.short}'s {trace.vocabulary.lane_name(lane)}", most


def ratio_headline(a: Trace, b: Trace, amount: Callable[[float], str] | None = None) -> str:
    """'In one whole step, DataParallel's GPU 0 sends 4.1× what a DDP rank sends': the busier device's bytes over the
    other engine's busiest, each in the one whole step a comparison reads (traffic.counted_step), the comparison's
    first line."""
    (first, most_a), (second, most_b) = busiest(a), busiest(b)
    if not most_a and not most_b:
        return f"{HEADLINE_STEP}, neither {a.spec.short} nor {b.spec.short} sends anything between devices"
    if not most_a or not most_b:
        (name, most), silent = ((first, most_a), b) if most_a else ((second, most_b), a)
        return (f"{HEADLINE_STEP}, {name} sends {(amount or in_unit_of(most))(most)}; {silent.spec.short}'s "
                f"{silent.vocabulary.lane_noun}s send nothing")
    if round(most_a / most_b, 1) == 1.0:
        return f"{HEADLINE_STEP}, {first} sends about what {second} sends ({(amount or in_unit_of(most_a))(most_a)})"
    (top, high), (low, little) = sorted(((first, most_a), (second, most_b)), key=lambda p: -p[1])
    return f"{HEADLINE_STEP}, {top} sends {high / little:.1f}× what {low} sends"


def in_unit_of(largest: float) -> Callable[[float], str]:
    """A writer of amounts in the unit `largest` is written in, so that a sentence's amounts read side by side."""
    return lambda size: bytes_alike(largest, size)[1]


def _kinds_text(parts: dict[str, float], amount: Callable[[float], str]) -> str:
    return ", ".join(f"{what} {amount(size)}" for what, size in parts.items() if size)


def sends_sentence(trace: Trace, amount: Callable[[float], str] | None = None) -> str:
    """'DataParallel: GPU 0 sends 1.2 KiB per step (parameter copy 800 B, input chunk 240 B); each other GPU at
    most 96 B (output gathered 96 B)', from the run's traffic by what moves."""
    sent = sent_per_step(trace)
    noun = trace.vocabulary.lane_noun
    if not any(sent):
        return f"{trace.spec.label}: its {noun}s send nothing between them"
    most = max(sent)
    amount = amount or in_unit_of(most)
    by_kind = sent_by_kind(trace)
    parts = lambda index: _kinds_text({what: column[index] for (_, what, _), column in by_kind.items()}, amount)
    if len({parts(index) for index in range(len(sent))}) == 1:  # every device sends the same things
        mean = " on average" if evened(trace) else ""  # an even share of what the ranks send unevenly
        return f"{trace.spec.label}: each {noun} sends {amount(most)} per step{mean} ({parts(0)})"
    top = sent.index(most)
    second = max(size for index, size in enumerate(sent) if index != top)
    second_index = next(index for index, size in enumerate(sent) if index != top and size == second)
    others = (f"each other {noun} at most {amount(second)} ({parts(second_index)})" if second
              else f"the other {noun}s nothing")
    return (f"{trace.spec.label}: {trace.vocabulary.lane_name(trace.lanes[top].id)} sends {amount(most)} per step "
            f"({parts(top)}); {others}")


def rows_sentence(trace: Trace) -> str:
    """Which rows the devices' forwards handled: '96 rows (96 distinct)', or the same rows on every device."""
    per_lane = [sorted(row for s in trace.spans if s.phase == "forward" and s.lane == lane.id for row in trace.sample_ids(s))
                for lane in trace.lanes]
    noun = trace.vocabulary.lane_noun
    if len(per_lane) > 1 and per_lane[0] and all(rows == per_lane[0] for rows in per_lane):
        return f"every one of {trace.spec.short}'s {noun}s handled the same {len(per_lane[0]):,} rows, one after another"
    rows = [row for lane in per_lane for row in lane]
    distinct = len(set(rows))
    extra = "" if distinct == len(rows) else f": {len(rows) - distinct:,} loaded again"
    return f"{trace.spec.short}'s {noun}s handled {len(rows):,} rows ({distinct:,} distinct{extra})"


def comparison(a: Trace, b: Trace) -> list[str]:
    """Plain sentences, every number from the two runs; first, when these settings cannot show what an engine is
    compared for, what would (the Compare figure's title says it too)."""
    sentences = [f"These settings cannot {lesson.cannot} ({lesson.why}). {lesson.sentence}" for lesson in lessons(a, b)]
    amount = in_unit_of(max(max(sent_per_step(a), default=0), max(sent_per_step(b), default=0)))  # one unit for both
    sentences.append(f"Per step (computed): {sends_sentence(a, amount)}. {sends_sentence(b, amount)}. "
                     f"{ratio_headline(a, b, amount)}.")
    sentences += times_sentences(a, b)
    sentences.append(f"Rows: {rows_sentence(a)}; {rows_sentence(b)}.")
    peaks = [f.peak_memory for trace in (a, b) for f in per_device(trace) if f.peak_memory is not None]
    memory = [memory_clause(trace, in_unit_of(max(peaks, default=0))) for trace in (a, b)]
    if all(memory):
        kinds = a.memory_kind if a.memory_kind == b.memory_kind else f"{a.memory_kind} for {a.spec.short}, {b.memory_kind} for {b.spec.short}"
        sentences.append(f"Memory ({kinds}): {memory[0]}; {memory[1]}.")
    return sentences


def memory_clause(trace: Trace, amount: Callable[[float], str] | None = None) -> str:
    """'DataParallel's GPU 0 peaks at 2.1 KiB against 1.1 KiB on its least loaded device', or one figure for all."""
    peaks = [f.peak_memory for f in per_device(trace) if f.peak_memory is not None]
    if not peaks:
        return ""
    amount = amount or in_unit_of(max(peaks))
    top, least = amount(max(peaks)), amount(min(peaks))
    noun = trace.vocabulary.lane_noun
    if top == least:
        return f"{trace.spec.short}'s {noun}s peak at {top} each"
    name = trace.vocabulary.lane_name(trace.lanes[peaks.index(max(peaks))].id)
    return f"{trace.spec.short}'s {name} peaks at {top} against {least} on its least loaded {noun}"


def _ms(seconds: float, largest: float | None = None) -> str:
    """A time in ns, µs or ms, the unit chosen by `largest` (the largest time it is read beside) when given."""
    scale = seconds if largest is None else largest
    if scale < 1e-6:
        return f"{seconds * 1e9:.1f} ns"
    if scale < 1e-4:
        return f"{seconds * 1e6:.1f} µs"
    return f"{seconds * 1e3:.2f} ms" if scale < 0.01 else f"{seconds * 1e3:.1f} ms"


def modelled_times(a: Trace, b: Trace) -> list[str | None] | None:
    """Per engine, its time for one step's transfers over each of LINKS, each link's pair in one unit: "0.24 ms over
    PCIe 4.0 x16, 25.3 µs over NVLink (A100)", None for an engine that sends nothing; None when nothing crosses
    between devices in either run. The same on every reload: bytes over bandwidth."""
    moves = [moves_per_step(a), moves_per_step(b)]
    if not any(sum(m) for engine in moves for m in engine):
        return None
    pairs = [(modelled(moves[0], link), modelled(moves[1], link)) for link in LINKS]
    return [", ".join(f"{_ms(pair[i], max(pair))} over {link.name}" for link, pair in zip(LINKS, pairs))
            if any(pair[i] for pair in pairs) else None for i in (0, 1)]


def _host(trace: Trace) -> str:
    """What stands in for its devices on this machine: 'DataParallel's GPUs are threads'."""
    noun = trace.vocabulary.lane_noun
    return f"{trace.spec.short}'s {noun}s are {'processes sharing the cores' if trace.spec.processes else 'threads'}"


def times_sentences(a: Trace, b: Trace) -> list[str]:
    """Each engine's time per step: measured, with its spread, beside the time its bytes would take on real links
    (modelled), then what each of the two can tell. On a CPU the measured times are the host's threads and
    processes, not GPUs: no engine is called faster from them."""
    summaries = [measured(a), measured(b)]
    model = modelled_times(a, b)
    if summaries == [None, None] and model is None:
        return []
    most = max((m.high for m in summaries if m is not None), default=0)  # both engines' measured times in one unit

    def clause(name: str, m, modelled_text: str | None) -> str:
        said = (f"measured {_ms(m.median, most)} (the median of {m.count} step{'s' if m.count != 1 else ''} after the "
                f"first; middle half {_ms(m.low, most)} to {_ms(m.high, most)})" if m is not None
                else "not measured (one step, a warm-up, only)")
        return f"{name}: {said}, modelled {modelled_text}" if modelled_text else \
            f"{name}: {said}, sends nothing, so no transfer time is modelled"

    engines = [clause(trace.spec.label, m, model[i] if model else None) for i, (trace, m) in enumerate(zip((a, b), summaries))]
    if on_gpus(a, b):
        faster = verdict(*summaries)
        told = ("Measured on these GPUs: " + (f"{(a, b)[faster].spec.short}'s middle half of steps lies wholly below the "
                                              "other's, measurably faster here." if faster is not None else
                                              "the spreads overlap, so no difference is measurable here."))
    else:
        hosts = [_host(trace) for trace in (a, b) if not on_gpus(trace)]
        told = (f"Measured on this machine's CPU, not on GPUs ({', '.join(hosts)}): these times call neither engine "
                "faster on GPUs.")
    sentences = [f"Time per step. {'. '.join(engines)}. {told}"]
    if model is not None:
        who, _ = busiest(max((a, b), key=lambda trace: max(sent_per_step(trace), default=0)))
        sentences.append(
            f"Modelled: one step's transfers on {len(a.lanes)} devices, each with a link of its own, at the link's "
            f"peak bandwidth each way (compute and latency left out). The busiest device decides: {who}.")
    return sentences
