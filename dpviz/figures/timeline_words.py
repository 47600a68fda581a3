"""What the timeline says under its panels: what the times mean and what was done to draw them.

Plotly does not wrap text, so every note is wrapped here (text_fit.wrap, with soft breaks presentation() can
wrap again) to the narrowest chart, a 468 px one (an 800 px window less the sidebar), at the notes' font size.
"""
from __future__ import annotations

from dpviz.trace import Trace
from dpviz.analysis.wording import plural, replica_threads
from dpviz.figures.sizes import NARROWEST_PX
from dpviz.figures.text_fit import wrap
from dpviz.figures.timeline_measured import Measured
from dpviz.figures.timeline_scale import CAP_FACTOR, CUT_MARK
from dpviz.figures.bounds import DETAIL_BATCHES
from dpviz.figures.timeline_summary import HIGH, LOW

NOTE_SIZE = 14  # the notes' font size (timeline.py draws them)


def wrapped(text: str) -> str:
    """`text` in lines that fit the narrowest chart, joined by plotly's soft line breaks."""
    return wrap(text, NOTE_SIZE, NARROWEST_PX - 60)  # the notes start at the plot's left edge


def times_note(trace: Trace, training: bool) -> str:
    """What a measured time is on this trace's devices, in a few plain sentences (times_detail says why)."""
    if trace.simulated and len(trace.lanes) == 1:
        return ("Simulated: one CPU thread stands in for the GPU. With one device DataParallel calls the model "
                "itself: no replicate, no gather.")
    if trace.simulated:
        text = ("Simulated: each GPU is a CPU thread, and the threads take turns, so the forwards run one after "
                "another, like a staircase. On real GPUs they overlap, as the steps panel draws them.")
        threads = replica_threads(trace)
        if threads < len(trace.lanes):
            text = (f"Simulated: the GPUs' replicas take turns on {plural(threads, 'CPU thread')}, one per core, so "
                    f"the forwards run one after another, like a staircase. On real GPUs they overlap, as the "
                    f"steps panel draws them.")
        if training and len(trace.lanes) > 1:
            text += " The backwards take turns here too."
        return text
    return ("Real GPUs: each time is read on the host after the GPU finished its work, so it includes launching "
            "the work and waiting for it; the forwards overlap.")


def times_detail(trace: Trace, training: bool) -> str:
    """Why the measured times look as they do, for the reader who asks (markdown, for the page's expander)."""
    if trace.simulated and len(trace.lanes) == 1:
        return ("One CPU thread stands in for the GPU, and DataParallel with a single device calls the module "
                "directly: there is nothing to scatter, replicate or gather.")
    if trace.simulated:
        text = ("The simulated GPUs are threads taking turns on one CPU (and on Python's interpreter lock), so their "
                "forwards come out one after another. Real DataParallel's threads also take turns, to launch the "
                "work, but each GPU then runs its own at the same time: the forwards overlap.")
        if training and len(trace.lanes) > 1:
            text += (" The backwards run one after another on the CPU autograd thread; real GPUs run each "
                     "device's backward on that device's own thread.")
        if trace.facts.get("threads") == "reused":
            # bench/bench_engine.py times both ways of running a call's replicas on threads.
            at_once = replica_threads(trace)
            if at_once < len(trace.lanes):
                text += (f" The {len(trace.lanes)} replicas took turns on {plural(at_once, 'thread')}, one per CPU core, "
                         f"borrowed from a pool: torch's parallel_apply starts and joins a new thread per replica on "
                         f"every call, which on CPU cores would only take turns for the interpreter lock.")
            else:
                text += (" Each replica ran on a thread of its own, borrowed from a pool: torch's parallel_apply "
                         "starts and joins a new thread per replica on every call, which apply leaves out here.")
        return text
    return ("Real GPUs: each time is the host's clock, read after waiting for the GPU to finish its work "
            "(torch.cuda.synchronize), so it includes launching the work and the wait; the replicas' "
            "forwards overlap.")


def scale_note(measured: Measured) -> str:
    """The cuts and the widening the detailed panel made, in a sentence each; '' when it made neither."""
    parts = []
    if measured.scale.cuts:
        parts.append(f"{CUT_MARK} on the time axis: a quiet moment, drawn shorter than it lasted.")
    if measured.widened:
        parts.append("The shortest bars are drawn a little wider so they show.")
    if parts:
        parts.append("Hovers give the measured times.")
    return " ".join(parts)


def scale_detail(measured: Measured) -> str:
    """The cuts' and the widening's rules, with this panel's numbers (markdown); '' when it made neither."""
    parts = []
    scale = measured.scale
    if scale.cuts:
        parts.append(f"{CUT_MARK} marks {plural(len(scale.cuts), 'quiet stretch')} (nothing started or ended) longer "
                     f"than {scale.cap:.3g} ms ({CAP_FACTOR} × the 75th percentile of span lengths): "
                     f"{'it is' if len(scale.cuts) == 1 else 'they are'} drawn {scale.cap:.3g} ms long, so one slow "
                     "moment does not set the scale; bars across a cut are drawn shorter.")
    if measured.widened:
        parts.append(f"Bars shorter than {measured.min_ms:.3g} ms are drawn that long so they show.")
    return " ".join(parts)


def summary_note(batches: int) -> str:
    return (f"{batches:,} batches are too many to draw one by one, so this is a typical batch: each bar runs from "
            "the median start to the median end; the thin line under a bar shows how much its end varied.")


def summary_detail(batches: int) -> str:
    return (f"The panel draws up to {DETAIL_BATCHES} batches one by one. For {batches:,} it shows a typical batch: "
            "each bar runs from the median start to the median end of that step on that GPU, measured from the "
            f"start of its own batch; the line under a GPU's own step spans the {LOW}th to the {HIGH}th percentile "
            "of its end (the middle half of the batches). The medians set the scale: a slow batch moves neither.")
def steps_note(shown: list[int], first: int, last: int) -> str:
    """Which batches the step panel shows, and that the others repeat them."""
    skipped = (last - first + 1) - len(shown)
    text = "Steps panel: a forward's or backward's bar is as long as its share of rows."
    if skipped > 0:
        text += f" The {plural(skipped, 'batch')} not drawn there {'repeats' if skipped == 1 else 'repeat'} the same steps."
    return text
