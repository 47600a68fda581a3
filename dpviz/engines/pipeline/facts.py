"""What a pipeline trace's facts hold, read back from a file: DDP's launcher facts and what each stage held, and
its own, every value checked (no torch).

    layers   per stage: the names of its layers ("net.2", "blocks.0", "embed + position")
    sent     per stage: [step, "send_activations" | "send_gradients", sends, bytes] for every step it sent in
    flight   per stage: [step, "forward" | "backward", microbatch, activation bytes held, microbatches held] after
             each of its computes, in the steps whose memory is kept
    cpu      per stage: [step, "forward" | "backward" | "loss", microbatch, seconds] the CPU time its thread spent in
             each of its passes (a run on the CPU; empty on GPUs; absent from files written before it was kept)
    cores    per stage: the CPU cores its process could run on (absent from files written before it was kept)
"""
from __future__ import annotations

from typing import Any

from dpviz.config import MAX_BATCHES
from dpviz.engines.ddp.facts import read_trace_facts
from dpviz.trace.values import (MAX_DEVICES, MAX_MEMORY_BYTES, MAX_MICROBATCHES, MAX_NAME, MAX_SECONDS, TraceError,
                                number, sequence, shown, text_of, whole)

SENT = ("send_activations", "send_gradients")
COMPUTES = ("forward", "backward")
PASSES = ("forward", "backward", "loss")  # what a stage's CPU time is kept for
MAX_LAYERS = 4096  # a user's nn.Sequential's children
MAX_CORES = 1 << 16  # a host's CPU cores: past any machine's


def read_trace_facts_pipeline(facts: Any) -> dict[str, Any]:
    out = read_trace_facts(facts)
    readers = {"cores": _cores, "cpu": _cpu, "flight": _flight, "layers": _layers, "sent": _sent}  # in the order a trace file writes them (sorted)
    for key, read in readers.items():
        if key in facts:
            out[key] = [None if stage is None else read(stage)
                        for stage in sequence(facts[key], f"facts {key}", MAX_DEVICES)]
    return out


def _layers(value: Any) -> list[str]:
    return [text_of(name, "a stage's layer", MAX_NAME) for name in sequence(value, "a stage's layers", MAX_LAYERS)]


def _sent(value: Any) -> list[list]:
    rows = []
    for row in sequence(value, "a stage's sends", MAX_BATCHES * len(SENT)):
        row = sequence(row, "a send's row", 4)
        if len(row) != 4 or row[1] not in SENT:
            raise TraceError(f"a send's row should be [step, one of {', '.join(SENT)}, sends, bytes], got {shown(row)}.")
        rows.append([whole(row[0], "a send's step", 0, MAX_BATCHES - 1), row[1],
                     whole(row[2], "a step's sends", 0, 2 * MAX_MICROBATCHES),
                     whole(row[3], "a step's bytes sent", 0, MAX_MEMORY_BYTES)])
    return rows


def _flight(value: Any) -> list[list]:
    rows = []
    for row in sequence(value, "a stage's activations in flight", 4 * MAX_MICROBATCHES * MAX_BATCHES):
        row = sequence(row, "an activations row", 5)
        if len(row) != 5 or row[1] not in COMPUTES:
            raise TraceError(f"an activations row should be [step, forward or backward, microbatch, bytes, microbatches], "
                             f"got {shown(row)}.")
        rows.append([whole(row[0], "its step", 0, MAX_BATCHES - 1), row[1],
                     whole(row[2], "its microbatch", 0, MAX_MICROBATCHES - 1),
                     whole(row[3], "its bytes", 0, MAX_MEMORY_BYTES),
                     whole(row[4], "its microbatches held", 0, MAX_MICROBATCHES)])
    return rows


def _cores(value: Any) -> int:
    return whole(value, "a stage's cores", 1, MAX_CORES)


def _cpu(value: Any) -> list[list]:
    rows = []
    for row in sequence(value, "a stage's CPU times", len(PASSES) * MAX_MICROBATCHES * MAX_BATCHES):
        row = sequence(row, "a CPU time's row", 4)
        if len(row) != 4 or row[1] not in PASSES:
            raise TraceError(f"a CPU time's row should be [step, one of {', '.join(PASSES)}, microbatch, seconds], "
                             f"got {shown(row)}.")
        rows.append([whole(row[0], "its step", 0, MAX_BATCHES - 1), row[1],
                     whole(row[2], "its microbatch", 0, MAX_MICROBATCHES - 1),
                     number(row[3], "its CPU seconds", 0.0, MAX_SECONDS)])
    return rows
