"""DataParallel's sentences about a run: its devices, its report's heading, the Memory view's note, the command line's last line."""
from __future__ import annotations

from typing import TYPE_CHECKING



from dpviz.catalogue import INPUT_SPECS, MODEL_SPECS
from dpviz.trace import Trace
from dpviz.analysis.wording import DEVICE_NAME_LIMIT, counted, plural, replica_threads
from dpviz.config import RunConfig
from dpviz.echo import markdown_text
from dpviz.analysis.failure_words import failure_text
import sys

if TYPE_CHECKING:  # annotations only: the command line's last line imports neither pandas nor plotly
    import pandas as pd

    from dpviz.figures.memory import ByteUnit


def dp_heading(trace: Trace) -> str:
    config = trace.config
    return (f"DataParallel run: {config.data_size:,} rows in batches of {config.batch_size:,} "
            f"on {plural(config.gpus, 'GPU')}, {MODEL_SPECS[config.model].label}, {INPUT_SPECS[config.inputs].label}")


def describe_gpus(trace: Trace, here_text: str) -> str:
    """DataParallel's lanes: real GPUs, or CPU threads standing in for them."""
    n = len(trace.lanes)
    if trace.backend == "cuda":
        # A trace's device names come from whoever wrote the file: shown as text, each cut short.
        names = ", ".join(markdown_text(lane.name, DEVICE_NAME_LIMIT) for lane in trace.lanes)
        return f"Real GPUs: torch.nn.DataParallel ran on {names} ({here_text})."
    threads = replica_threads(trace)
    if threads < n:
        return (f"Simulated devices: {n} GPUs, whose replicas took turns on {plural(threads, 'CPU thread')} (one per "
                f"core), following DataParallel's rules exactly ({here_text}).")
    return (
        f"Simulated devices: {n} CPU thread{'s' if n != 1 else ''} stand{'s' if n == 1 else ''} in for "
        f"{n} GPU{'s' if n != 1 else ''}, following DataParallel's rules exactly ({here_text})."
    )


def device_zero_why(trace: Trace, table: pd.DataFrame, unit: ByteUnit) -> str:
    """Device 0's fullest moment of this batch against the largest other device then, and what it
    holds that the others don't (or holds more of) over the batch."""
    vocabulary = trace.vocabulary
    first = trace.lanes[0].id
    at = table.loc[table.loc[table["device"] == first, "total"].idxmax()]
    moment = table[table["phase"] == at["phase"]]
    others = moment[moment["device"] != first].groupby("device")["total"].first()
    most, who, mine = int(others.max()), int(others.idxmax()), int(at["total"])
    ratio = f"{mine / most:.1f}× the {unit.amount(most)} of {vocabulary.lane_name(who)}" if most else f"{vocabulary.lane_name(who)} holds nothing"
    text = f"<b>After {at['step']}, {vocabulary.lane_name(first)} holds {unit.amount(mine)}: {ratio}.</b>"
    if trace.memory_kind == "measured":
        return text + "<br>Measured: one total per device, not broken down by kind of tensor."
    peak = table[table["category"] != ""].groupby(["category", "device"])["bytes"].max().unstack(fill_value=0)
    alone, more = [], []
    for category in vocabulary.memory_names:
        if category not in peak.index or peak.loc[category].get(first, 0) == 0:
            continue
        rest = int(peak.loc[category].drop(first).max()) if len(peak.columns) > 1 else 0
        if rest == 0:
            alone.append(category)
        elif peak.loc[category, first] > rest:
            more.append(category)
    name = vocabulary.lane_name(first)
    if alone:
        text += f"<br>Only {name} holds: {' · '.join(alone)}."
    if more:
        text += f"<br>{name} holds more: {' · '.join(vocabulary.memory_kind(c).more or c for c in more)}."
    return text


def dp_outcome(trace: Trace, config: RunConfig, ranked: bool) -> int:
    """The DataParallel run's last line on stderr, and the exit status."""
    kind = "real GPUs" if trace.backend == "cuda" else "simulated devices"
    batches = len(trace.batches)
    if trace.failure is not None:
        print(f"dpviz: DataParallel failed in batch {counted(trace.failure.batch)} of {config.num_batches} on {config.gpus} {kind}: "
              f"{failure_text(trace)}", file=sys.stderr)
        return 1
    kind = kind if config.gpus > 1 else kind[:-1]  # "1 simulated device", "1 real GPU"
    print(f"dpviz: {batches} batch{'es' if batches != 1 else ''} on {config.gpus} {kind} in {trace.duration:.3f} s.", file=sys.stderr)
    return 0
