"""What a pipeline run's key figures, explanation, log and device sentence say, from its trace.

    key_figures_pipeline(trace)        # {label: short value} for the page's row of metrics
    summary_rows_pipeline(trace)       # (key figure, value) rows for the report's table
    explain_pipeline(trace)            # short markdown paragraphs, each opening with a bold lead
    tutorial_log_pipeline(trace)       # a header, then a line per step and one per stage in it
    describe_stages(trace, here_text)  # one markdown sentence on the lanes: real processes, one per stage

Every number comes from the trace: the spans (each forward, backward, loss and transfer naming its microbatch),
the step's bubble replayed with each stage on a device of its own beside the textbook's and this host's wall clock
(read/bubble.py), and the facts: each stage's layers, what it held
and what it sent. Numbers a reader sees count from 1 (step 1 is the trace's batch 0, stage 1 its lane 0,
microbatch 1 its microbatch 0). A trace file's own words (layer and lane names, errors) go in as text: in a code
span or escaped in markdown, cut and on one line in the log and the table. No torch.
"""
from __future__ import annotations

from dpviz.analysis.batch_facts import batches_planned
import re
from statistics import mean

from dpviz.analysis.batch_facts import phase_times
from dpviz.analysis.wording import DEVICE_NAME_LIMIT, counted, human_bytes, numbered, plural
from dpviz.echo import MESSAGE_LIMIT, code_span, cut, markdown_text
from dpviz.engines.ddp.read.explain import _warnings
from dpviz.engines.ddp.read.summary import _peaks
from dpviz.engines.pipeline.read.bubble import (CPU, DEVICE, busy, computes, held_most, host_cores, idle_share,
                                                opening_step, order, percent, replay, textbook_share, window)
from dpviz.engines.pipeline.read.traffic import pipeline_model_bytes, sent_bytes
from dpviz.exports.tutorial_log import size_text, warnings_and_failure
from dpviz.trace import Trace

# Each schedule: its name, torch's class, and what it does, in a clause.
SCHEDULES = {
    "gpipe": ("GPipe", "ScheduleGPipe", "every microbatch's forward, then every backward"),
    "1f1b": ("1F1B", "Schedule1F1B", "a backward as soon as the last stage has a microbatch, then one forward "
                                     "and one backward in turn"),
}
NAME_LIMIT = 40  # characters of a layer's or a lane's name from a trace file
SHOWN = 4  # layers, stages or cuts named before "and N more"
ORDER_SHOWN = 32  # forwards and backwards of a stage's step written out before "…"
UNEVEN = 0.05  # a replayed bubble this far above the textbook's is said to be, and why (the stages' uneven work)
_DEFAULT_LANE = re.compile(r"^stage \d+ \((.*)\)$")  # merge's lane names: "stage 1 (rank 0, process on the CPU)"


# ---- what the trace says, read once per question

def _stage(lane: int) -> str:
    """A stage as a reader counts it: from 1 (lanes count from 0)."""
    return f"stage {lane + 1:,}"


def _listed(items: list[str], limit: int = SHOWN) -> str:
    more = f" and {len(items) - limit:,} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f} ms"


def _schedule(trace: Trace) -> tuple[str, str, str]:
    return SCHEDULES.get(trace.config.schedule, (str(trace.config.schedule), "its schedule", "its own order"))


def _held(trace: Trace) -> list[dict] | None:
    held = trace.facts.get("held")
    return held if held and None not in held else None


def _layers(trace: Trace) -> list[list[str] | None]:
    layers = list(trace.facts.get("layers") or [])
    return (layers + [None] * len(trace.lanes))[:len(trace.lanes)]


def _ended(trace: Trace) -> list[int]:
    """The steps that ran to their end (a failing step did not)."""
    failed = trace.failure.batch if trace.failure is not None else None
    return [b.index for b in trace.batches if b.index != failed]


def _shown_step(trace: Trace) -> int | None:
    """The step the figures are read from: the one the views open on, when it ran to its end."""
    step = opening_step(trace) if trace.batches else None
    return step if step in _ended(trace) else None


def _idle(trace: Trace, step: int) -> float | None:
    try:
        return idle_share(trace, step)
    except ValueError:  # a step that ran no microbatch
        return None


def _replayed(trace: Trace, step: int) -> float | None:
    """The step's bubble replayed with each stage on a device of its own (bubble.replay), or None."""
    try:
        replayed = replay(trace, step)
    except ValueError:  # a step that ran no microbatch
        return None
    return None if replayed is None else replayed.share


def _host(trace: Trace) -> str:
    """'4 processes on 2 cores': what ran on the host's wall clock, in a sentence's words."""
    stages = len(trace.lanes)
    if trace.backend == "cuda":
        return f"{plural(stages, 'process')}, a GPU each"
    cores = host_cores(trace)
    return f"{plural(stages, 'process')} on " + (plural(cores, "core") if cores else "shared cores")


def _per_microbatch(trace: Trace) -> int:
    """Rows in one microbatch, as the first stage's forwards took them (the config's when none ran)."""
    rows = [s.rows for s in trace.spans if s.phase == "forward" and s.lane == 0]
    return max(rows) if rows else trace.config.batch_size // max(1, trace.config.microbatches)


def _held_most(trace: Trace, step: int) -> list[int]:
    """Per stage, the most microbatches whose activations it held at once: the facts' count where kept, else from
    the order the stage ran its forwards and backwards in."""
    kept = held_most(trace, step)
    if kept is not None:
        return kept
    most = []
    for stage in range(len(trace.lanes)):
        held = top = 0
        for kind, _ in order(trace, step, stage):
            held += 1 if kind == "F" else -1
            top = max(top, held)
        most.append(top)
    return most


def _activation_peak(trace: Trace, step: int) -> list[int] | None:
    """Per stage, the most bytes of activations it held in the step (facts "flight"), or None."""
    flight = trace.facts.get("flight")
    if not flight or None in flight:
        return None
    most = [max((row[3] for row in rows if row[0] == step), default=None) for rows in flight]
    return None if None in most else most


def _order_text(trace: Trace, step: int, stage: int) -> str:
    """'F1 F2 F3 F4 B1 B2 B3 B4': the stage's forwards and backwards in the step, microbatches counted from 1."""
    ran = [f"{kind}{counted(micro)}" for kind, micro in order(trace, step, stage)]
    return " ".join(ran[:ORDER_SHOWN]) + (f" … ({len(ran) - ORDER_SHOWN:,} more)" if len(ran) > ORDER_SHOWN else "")


def _sends_of(trace: Trace, step: int) -> dict[tuple[int, str], tuple[int, int]]:
    """(stage, send phase) -> (sends, bytes) in the step."""
    return {(stage, phase): value for (at, stage, phase), value in sent_bytes(trace).items() if at == step}


def _where(trace: Trace) -> str:
    stages = len(trace.lanes)
    return "one process per GPU, NCCL" if trace.backend == "cuda" else f"{plural(stages, 'process')} on the CPU, gloo"


def _held_text(counts: list[int]) -> str:
    """'4, 3, 2, 1' per stage (a long pipeline: its first and last)."""
    if len(counts) <= SHOWN:
        return ", ".join(f"{n:,}" for n in counts)
    return f"{counts[0]:,} ({_stage(0)}) to {counts[-1]:,} ({_stage(len(counts) - 1)})"


# ---- key figures

def key_figures_pipeline(trace: Trace) -> dict[str, str]:
    """Headline figures of a pipeline run, label -> short value (the words go in the labels)."""
    config, stages = trace.config, len(trace.lanes)
    name, _, _ = _schedule(trace)
    figures = {
        "stages (processes)": f"{stages:,}",
        "schedule": name,
        "microbatches per step": f"{config.microbatches:,} × {plural(_per_microbatch(trace), 'row')}",
        "steps": f"{len(trace.batches):,}",
    }
    step = _shown_step(trace)
    if step is not None:
        replayed, measured = _replayed(trace, step), _idle(trace, step)
        if replayed is not None:
            figures[f"idle in step {counted(step)}, replayed (textbook)"] = \
                f"{percent(replayed)} ({percent(textbook_share(stages, config.microbatches))})"
        if measured is not None:
            figures["idle on this host's wall clock"] = percent(measured)
        figures["microbatches held at most, per stage"] = _held_text(_held_most(trace, step))
        sent = sum(size for _, size in _sends_of(trace, step).values())
        if sent:
            figures["sent between stages per step"] = human_bytes(sent)
    peaks = _peaks(trace)
    if peaks is not None:
        low, high = peaks
        if low == high:
            figures["memory peak, every stage"] = human_bytes(high)
        else:
            figures["memory peak per stage"] = f"{human_bytes(low)}–{human_bytes(high)}"
    return figures


# ---- the report's table

def _plain(text: str) -> str:
    """A trace file's name for the table or the log: on one line, cut (the table and the log show text)."""
    return cut(" ".join(str(text).split()), NAME_LIMIT)


def _per_stage(values: list[str]) -> str:
    shown = [f"{_stage(s)}: {v}" for s, v in enumerate(values)]
    return "; ".join(shown[:2 * SHOWN]) + (f"; and {len(shown) - 2 * SHOWN:,} more" if len(shown) > 2 * SHOWN else "")


def summary_rows_pipeline(trace: Trace) -> list[tuple[str, str]]:
    """Every key figure of a pipeline run as (key figure, value) text."""
    config, stages = trace.config, len(trace.lanes)
    name, torch_name, what = _schedule(trace)
    how = "one GPU each, NCCL" if trace.backend == "cuda" else "on the CPU, gloo, no GPU"
    loaded = sum(b.rows for b in trace.batches)
    distinct = len({i for b in trace.batches for i in b.sample_ids})
    left = config.data_size % config.batch_size
    rows = [
        ("engine", f"{trace.spec.label}: {plural(stages, 'stage')}, each its own process ({how})"),
        ("schedule", f"{name} (torch's {torch_name}): {what}"),
        ("steps", f"{len(trace.batches):,}: {loaded:,} rows loaded by the first stage, {distinct:,} distinct "
                  "dataset rows"
         + (f"; the last {plural(left, 'row')} of each epoch left out (a short batch)" if left else "")),
        ("microbatches", f"each step's {plural(config.batch_size, 'row')} cut into "
                         f"{plural(config.microbatches, 'microbatch')} of {plural(_per_microbatch(trace), 'row')}"),
    ]
    layers = _layers(trace)
    if any(layers):
        rows.append(("layers per stage", _per_stage(
            ["not reported" if mine is None else ", ".join(_plain(n) for n in mine[:SHOWN])
             + (f" and {len(mine) - SHOWN:,} more" if len(mine) > SHOWN else "") for mine in layers])))
    held = _held(trace)
    if held is not None:
        params, _ = pipeline_model_bytes(trace)
        rows.append(("parameters per stage", _per_stage(
            [f"{h['parameters']['elements']:,} ({human_bytes(h['parameters']['bytes'])})" for h in held])
            + f"; {sum(h['parameters']['elements'] for h in held):,} in all ({human_bytes(params or 0)}), the whole "
              "model once"))
        rows.append(("optimizer state per stage", _per_stage(
            [human_bytes(h["optimizer state"]["bytes"]) if h["parameters"]["elements"] else "none (no parameters, no "
             "optimizer)" for h in held])))
    step = _shown_step(trace)
    if step is not None:
        sends = _sends_of(trace, step)
        cuts = []
        for s in range(stages - 1):
            (count, size), (back, back_size) = (sends.get((s, "send_activations"), (0, 0)),
                                                sends.get((s + 1, "send_gradients"), (0, 0)))
            cuts.append(f"{_stage(s)} → {s + 2:,}: {plural(count, 'activation')} ({human_bytes(size)}), back "
                        f"{plural(back, 'gradient')} ({human_bytes(back_size)})")
        rows.append((f"sent in step {counted(step)}", "; ".join(cuts[:SHOWN]) + (f"; and {len(cuts) - SHOWN:,} more cuts"
                                                                             if len(cuts) > SHOWN else "")))
        textbook = textbook_share(stages, config.microbatches)
        for label, share_of, how in (("idle share (bubble), replayed", _replayed, "replayed with each stage on a "
                                      "device of its own"),
                                     ("idle share on this host's wall clock", _idle, f"as {_host(trace)} ran it")):
            shares = [(s, share_of(trace, s)) for s in _ended(trace)]
            shares = [(s, share) for s, share in shares if share is not None]
            shown = dict(shares).get(step)
            if shown is None:
                continue
            spread = (f" ({percent(min(v for _, v in shares))} to {percent(max(v for _, v in shares))} over "
                      f"{plural(len(shares), 'step')})" if len(shares) > 1 else "")
            rows.append((label, f"{percent(shown)} in step {counted(step)}{spread}, {how}; the textbook's "
                         f"(S − 1) / (M + S − 1) = {stages - 1} / {config.microbatches + stages - 1} is "
                         f"{percent(textbook)}"))
        rows.append((f"microbatches held at most in step {counted(step)}", _per_stage(
            [f"{n:,}" for n in _held_most(trace, step)])))
    for phase, time in phase_times(trace).items():
        known = phase in trace.vocabulary.order
        where = trace.vocabulary.phase(phase).place if known else ""
        rows.append((f"time in {trace.vocabulary.phase(phase).label if known else phase}",
                     f"{_ms(time.total_s)} total over {plural(time.spans, 'span')}" + (f" ({where})" if where else "")))
    rows.append(("run time", _ms(trace.duration)))
    peaks = _peaks(trace)
    if peaks is not None:
        low, high = peaks
        peak = f"{human_bytes(high)} on every stage" if low == high else f"{human_bytes(low)} to {human_bytes(high)}"
        kind = "computed from tensor sizes" if trace.memory_kind == "computed" else "measured"
        rows.append(("peak memory per stage", f"{peak} ({kind})"))
    return rows


# ---- what happened, paragraph by paragraph

def _processes(trace: Trace) -> str:
    k = len(trace.lanes)
    if trace.backend == "cuda":
        return (f"**Processes, one per stage and GPU.** {trace.spec.label} ran {plural(k, 'stage')}: "
                f"{plural(k, 'Python process')}, each with its own layers of the model on its own GPU, passing "
                "microbatches to its neighbours over NCCL.")
    return (f"**Processes, not GPUs.** {trace.spec.label} ran {plural(k, 'stage')}: {plural(k, 'Python process')} on "
            "this machine's CPU, each with its own layers of the model, passing microbatches to its neighbours over "
            "gloo. No GPU was used, and none was simulated: these are real processes and real sends between them. "
            f"The {k} processes share the machine's few CPU cores, so the measured times include each stage waiting "
            "to be scheduled.")


def _failure(trace: Trace) -> str | None:
    failure = trace.failure
    if failure is None:
        return None
    who = _stage(failure.replica) if failure.replica is not None else "a stage"
    text = (f"**Step {counted(failure.batch)} failed** on {who}: {code_span(failure.headline, MESSAGE_LIMIT)}. Every "
            "stage stopped with it, and the trace ends there.")
    if _per_microbatch(trace) == 1 and "Expected more than 1 value per channel" in failure.message:
        text += (f" Each microbatch held a single row (batch_size {trace.config.batch_size:,} cut into "
                 f"{trace.config.microbatches:,}), and a BatchNorm1d layer in training mode cannot take its statistics "
                 "over one row: fewer microbatches, or a larger batch, give each more.")
    return text


def _microbatches(trace: Trace) -> str | None:
    if not trace.batches:
        return None
    config, stages = trace.config, len(trace.lanes)
    rows, per = trace.batches[0].rows, _per_microbatch(trace)
    text = (f"**A batch cut into microbatches.** Each step the first stage loaded {plural(rows, 'row')} (batch_size "
            f"{config.batch_size:,}), and torch's schedule cut them into "
            f"{plural(config.microbatches, 'microbatch')} of {plural(per, 'row')}; the last stage read the same rows "
            "to make their targets, as a pipeline's last stage reads the labels. Only the first stage sees the "
            "inputs and only the last computes the loss, one per microbatch"
            + ("; the stages between see activations only." if stages > 2 else "."))
    left = config.data_size % config.batch_size
    if left and trace.failure is None:
        seen = len({i for b in trace.batches for i in b.sample_ids})
        text += (f" Of the {config.data_size:,} rows, {config.data_size - left:,} make "
                 f"{plural(config.data_size // config.batch_size, 'full batch')} an epoch; the last "
                 f"{plural(left, 'row')} of each epoch {'was' if left == 1 else 'were'} left out, because a short "
                 "batch would cut into microbatches of another shape, and torch's stages receive every microbatch into "
                 "buffers shaped like the first"
                 + (f" ({plural(config.data_size - seen, 'dataset row')} never loaded)." if seen < config.data_size
                    else "."))
    return text


def _stage_layers(trace: Trace) -> str | None:
    layers, held = _layers(trace), _held(trace)
    if not any(layers) and held is None:
        return None
    parts = []
    for s, mine in enumerate(layers):
        names = _listed([code_span(n, NAME_LIMIT) for n in mine]) if mine else "layers it did not report"
        amount = ""
        if held is not None:
            p = held[s]["parameters"]
            amount = (f" ({plural(p['elements'], 'parameter')}, {human_bytes(p['bytes'])})" if p["elements"]
                      else " (no parameters)")
        parts.append(f"{_stage(s)} holds {names}{amount}")
    shown = "; ".join(parts[:SHOWN]) + (f"; and {plural(len(parts) - SHOWN, 'more stage')}"
                                        if len(parts) > SHOWN else "")
    text = (f"**Each stage holds its own layers.** {shown[0].upper()}{shown[1:]} (stages are counted from 1 here; "
            "stage 1 is torch's `stage_index=0`).")
    if held is None:
        return text
    total = sum(h["parameters"]["elements"] for h in held)
    params, _ = pipeline_model_bytes(trace)
    text += (f" Together {plural(total, 'parameter')} ({human_bytes(params or 0)}): the whole model, held once, no "
             "stage holding a copy of another's layers, where DDP keeps the whole model on every rank.")
    kind = {"sgd": "SGD", "adam": "Adam"}.get(trace.config.optimizer, str(trace.config.optimizer))
    empty = [s for s, h in enumerate(held) if not h["parameters"]["elements"]]
    micro = trace.config.microbatches
    if micro > 1:
        text += (f" A stage's gradients add up over the step's {micro:,} microbatches (torch scales each "
                 f"microbatch's loss by 1/{micro:,}: the gradients of their mean loss).")
    text += (f" After each step's schedule, every stage's {kind} steps only its own parameters, with its own "
             "optimizer state; nothing is averaged between the stages, since no other process holds them.")
    if empty:
        named = _listed([_stage(s) for s in empty])
        text += (f" {named[0].upper()}{named[1:]} "
                 f"{'holds' if len(empty) == 1 else 'hold'} no parameters (nothing to learn), so "
                 f"{'it has' if len(empty) == 1 else 'they have'} no optimizer.")
    return text


def _order(trace: Trace) -> str | None:
    step = _shown_step(trace)
    if step is None:
        return None
    stages, micro = len(trace.lanes), trace.config.microbatches
    name, _, _ = _schedule(trace)
    first, last = _order_text(trace, step, 0), _order_text(trace, step, stages - 1)
    ran = (f"In step {counted(step)} {_stage(0)} ran {first}" + (f", and {_stage(stages - 1)} {last}" if last != first else
                                                              ", every stage in the same order"))
    held = _held_most(trace, step)
    peak = _activation_peak(trace, step)
    bytes_text = (f" ({human_bytes(peak[0])} of activations on {_stage(0)} at most)" if peak else "")
    if trace.config.schedule == "gpipe":
        held_text = (f"every stage held the activations of {plural(held[0], 'microbatch')} at once"
                     if len(set(held)) == 1 else
                     f"the stages held the activations of at most {_held_text(held)} microbatches at once")
        return (f"**GPipe: every forward, then every backward.** {ran} (F for a microbatch's forward, B for its "
                f"backward). A stage keeps each microbatch's activations from its forward until its backward, so "
                f"{held_text}{bytes_text}" + (f", all {micro:,} of the step's." if max(held) == micro > 1 else "."))
    fewer = held == [min(micro, stages - s) for s in range(stages)]
    return (f"**1F1B: a backward as soon as it can.** {ran} (F for a microbatch's forward, B for its backward): a "
            "few forwards to fill the pipeline, then one forward and one backward in turn, then the last backwards. A "
            f"stage frees a microbatch's activations at its backward, so the stages held at most {_held_text(held)} "
            f"microbatches at once{bytes_text}"
            + (f": {_stage(0)} as many as there are stages, each later stage one fewer" if fewer else "")
            + f", where GPipe keeps all {micro:,} on every stage. In the textbook the bubble is the same as GPipe's: "
            "what 1F1B saves is memory.")


def _bubble(trace: Trace) -> str | None:
    step = _shown_step(trace)
    replayed = None if step is None else replay(trace, step)
    measured = None if step is None else _idle(trace, step)
    if replayed is None or measured is None:
        return None
    stages, micro = len(trace.lanes), trace.config.microbatches
    textbook = textbook_share(stages, micro)
    text = (f"**The bubble.** Replayed with each stage on a device of its own, step {counted(step)} left the stages "
            f"idle {percent(replayed.share)} of its time, where the textbook's bubble at these settings, "
            f"(S − 1) / (M + S − 1) = {stages - 1} / {micro + stages - 1}, is {percent(textbook)}. ")
    if replayed.clock == CPU:
        text += ("The replay lays each forward and backward down as long as it cost (the CPU time of its stage's "
                 "thread, which waiting for a core does not count), in the order torch ran it, each as soon as its "
                 "stage is free and the microbatch has come from its neighbour; a send takes no time, as in the "
                 "textbook.")
    elif replayed.clock == DEVICE:
        text += ("The replay lays each forward and backward down as long as it took on its stage's GPU, in the order "
                 "torch ran it, each as soon as its stage is free and the microbatch has come from its neighbour; a "
                 "send takes no time, as in the textbook.")
    else:
        text += ("This file keeps no CPU time per pass (facts 'cpu', kept since the replay was added), so each pass "
                 "is replayed as long as its wall time, which counts the waits for a core too.")
    text += " " + _uneven(replayed, textbook)
    if step > 0:
        before = _replayed(trace, 0)
        if before is not None:
            text += (f" (Step 1, which also sent each stage's tensor shapes ahead, replays idle {percent(before)}: the "
                     f"views open on step {counted(step)}.)")
    return text + " " + _wall(trace, step, measured)


def _uneven(replayed, textbook: float) -> str:
    """Why the replay's bubble is above the textbook's: the textbook's stages all take the same time, these did not."""
    worked = [sum(size for *_, size in stage) for stage in replayed.passes]
    if replayed.share - textbook <= UNEVEN or not any(worked):
        return "More microbatches shrink it: the fill and the drain stay S − 1 passes long while the work grows with M."
    slow = max(range(len(worked)), key=lambda s: worked[s])
    light = min(range(len(worked)), key=lambda s: worked[s])
    return (f"It is above the textbook's because the textbook's stages all take the same time and these did not: "
            f"{_stage(slow)} computed {_ms(worked[slow])} of the step, {_stage(light)} {_ms(worked[light])}, and every "
            "stage waits on the slowest. More "
            "microbatches still shrink it: the fill and the drain stay S − 1 passes long while the work grows with M.")


def _wall(trace: Trace, step: int, measured: float) -> str:
    """The host's wall clock, second: what it measured and why it differs from the replay."""
    stages = len(trace.lanes)
    start, end = window(trace, step)
    worked = sum(busy(trace, step, s) for s in range(stages))
    text = (f"On this host's wall clock ({_host(trace)}) the stages sat idle {percent(measured)} of the step: of "
            f"{stages} × {_ms(end - start)} they computed {_ms(worked)} in all.")
    if trace.backend == "cuda":
        return text + " The rest they waited for a microbatch from a neighbour, over NCCL."
    passes = [s.duration for s in computes(trace, step) if s.phase in ("forward", "backward")]
    waits = [s.duration for s in trace.spans_of(step) if s.phase in ("receive_activations", "receive_gradients")]
    cores = host_cores(trace)
    fewer = f"{plural(stages, 'process')} take turns on {plural(cores, 'core')}, " if cores and cores < stages else ""
    text += (f" That clock is this machine's, not the schedule's: {fewer}each microbatch passes through gloo between "
             "processes, and on layers this small passing it costs more than computing it")
    if passes and waits:
        text += f" (a forward or backward took {_ms(mean(passes))} on average, a receive waited {_ms(mean(waits))})"
    return text + ". The replay above takes those waits out; the bubble is what is left."


def _sends(trace: Trace) -> str | None:
    step = _shown_step(trace)
    if step is None or not trace.config.train:
        return None
    sends = _sends_of(trace, step)
    if not sends:
        return None
    stages = len(trace.lanes)
    cuts = []
    for s in range(stages - 1):
        count, size = sends.get((s, "send_activations"), (0, 0))
        back, back_size = sends.get((s + 1, "send_gradients"), (0, 0))
        cuts.append(f"{_stage(s)} sent the activations of {plural(count, 'microbatch')} to {_stage(s + 1)} "
                    f"({human_bytes(size)}), and {_stage(s + 1)} sent {plural(back, 'gradient')} back "
                    f"({human_bytes(back_size)})")
    listed = "; ".join(cuts[:SHOWN]) + (f"; and so on for {plural(len(cuts) - SHOWN, 'more cut')}"
                                        if len(cuts) > SHOWN else "")
    total = sum(size for _, size in sends.values())
    _, grads = pipeline_model_bytes(trace)
    text = (f"**Activations forward, gradients back.** In step {counted(step)} {listed}. That is all that crossed between "
            f"the processes, {human_bytes(total)} in the step: point to point between neighbours, one tensor a "
            "microbatch each way, no all-reduce and no parameter.")
    if grads:
        text += (" What crosses grows with the rows and the width of the activations at each cut, not with the "
                 f"model: its gradients, which DDP would all-reduce every step, are {human_bytes(grads)} in all.")
    return text


def _epochs(trace: Trace) -> str | None:
    epochs = trace.config.epochs
    per = trace.config.data_size // trace.config.batch_size
    if epochs < 2 or per < 1 or len(trace.batches) <= per:
        return None
    orders = [[i for b in trace.batches[e * per:(e + 1) * per] for i in b.sample_ids] for e in range(epochs)]
    orders = [o for o in orders if o]
    same = all(o == orders[0] for o in orders[1:])
    text = f"**{epochs} epochs.** Each epoch is {plural(per, 'step')}. "
    if same:
        return text + "Every epoch loaded the same rows in the same order."
    return text + "Each epoch's DataLoader shuffled the rows anew, the first and the last stage alike."


def explain_pipeline(trace: Trace) -> list[str]:
    """Short markdown paragraphs explaining what this pipeline run did and why, with its own numbers."""
    paragraphs = [
        _processes(trace),
        _failure(trace),
        *_warnings(trace),
        _microbatches(trace),
        _stage_layers(trace),
        _order(trace),
        _bubble(trace),
        _sends(trace),
        _epochs(trace),
    ]
    return [p for p in paragraphs if p]


# ---- the log

def _header(trace: Trace) -> list[str]:
    config, stages = trace.config, len(trace.lanes)
    name, _, _ = _schedule(trace)
    lines = [f"Let's use {plural(stages, 'stage')}! ({_where(trace)}; {name}: each step's {config.batch_size:,} rows "
             f"cut into {plural(config.microbatches, 'microbatch')} of {plural(_per_microbatch(trace), 'row')})"]
    for s, mine in enumerate(_layers(trace)):
        if mine is not None:
            lines.append(f"{_stage(s)} holds {', '.join(_plain(n) for n in mine[:2 * SHOWN])}"
                         + (f" and {len(mine) - 2 * SHOWN:,} more" if len(mine) > 2 * SHOWN else ""))
    return lines


def _stage_line(trace: Trace, step: int, stage: int, sends: dict) -> str | None:
    ran = computes(trace, step, stage)
    forwards = [s for s in ran if s.phase == "forward"]
    if not ran:
        return None
    text = f"{_stage(stage)}:"
    if forwards:
        text += (f" input size {size_text(forwards[0].input_shape)} output size "
                 f"{size_text(forwards[0].output_shape)};")
    text += f" {_order_text(trace, step, stage)}"
    losses = sum(1 for s in ran if s.phase == "loss")
    if losses:
        text += f"; {plural(losses, 'loss')}"
    for phase, what in (("send_activations", "activation"), ("send_gradients", "gradient")):
        count, size = sends.get((stage, phase), (0, 0))
        if count:
            text += f"; sent {plural(count, what)} ({human_bytes(size)})"
    if any(s.lane == stage for s in trace.spans_of(step, "step")):
        text += "; optimizer step"
    return text


def tutorial_log_pipeline(trace: Trace) -> str:
    """The header (stages, processes, microbatches, each stage's layers), then each step's line and each stage's
    in it: the sizes it took and gave, the order it ran its microbatches in, what it sent."""
    lines = _header(trace)
    config, stages = trace.config, len(trace.lanes)
    total = batches_planned(trace)
    textbook = textbook_share(stages, config.microbatches)
    for batch in trace.batches:
        step = batch.index
        failed = trace.failure is not None and trace.failure.batch == step
        text = (f"{numbered(step, total, 'Step')}: {plural(batch.rows, 'row')}, "
                f"{plural(config.microbatches, 'microbatch')} through {plural(stages, 'stage')}")
        share = None if failed else _replayed(trace, step)
        wall = None if failed else _idle(trace, step)
        if failed:
            text += ", and it failed:"
        elif share is not None:
            text += f", idle {percent(share)} of the step replayed (textbook {percent(textbook)})"
            if wall is not None:
                text += f", {percent(wall)} on this host's wall clock"
        lines.append(text)
        sends = _sends_of(trace, step)
        lines += [line for s in range(stages) if (line := _stage_line(trace, step, s, sends))]
        lines += warnings_and_failure(trace, step)
    return "\n".join(lines) + "\n"


# ---- the lanes, in a sentence

def _lane_text(trace: Trace, lane: int, name: str) -> str:
    """'stage 1 (process on cuda:0)': the stage counted from 1, where it ran as its name says (escaped)."""
    found = _DEFAULT_LANE.match(name)
    where = found.group(1) if found else name
    return f"{_stage(lane)} ({markdown_text(where, DEVICE_NAME_LIMIT)})"


def describe_stages(trace: Trace, here_text: str) -> str:
    """The lanes: real processes, one per stage, each holding its own layers; on the CPU never called GPUs."""
    stages = plural(len(trace.lanes), "stage")
    _, torch_name, _ = _schedule(trace)
    what = f"torch.distributed.pipelining ({torch_name})"
    if trace.backend == "cuda":
        names = _listed([_lane_text(trace, lane.id, lane.name) for lane in trace.lanes], 2 * SHOWN)
        return (f"Real processes on real GPUs: {what} ran {stages}, one process per stage on its own GPU, each holding "
                f"its own layers of the model, over NCCL: {names} ({here_text}).")
    return (f"Real processes, no GPU: {what} ran {stages}, each its own process on the CPU holding its own layers of "
            f"the model, talking over gloo ({here_text}).")
