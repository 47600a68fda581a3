"""A step of DDP (and of ZeRO-1, which runs it) in the columns every engine shares (dpviz.analysis.one_step).

Input: each rank reads its own rows (its DistributedSampler shard); nothing is scattered. Forward: each rank runs
its own copy (rank 0's buffers broadcast first, when the model has any). Backward: the gradients all-reduced,
bucket by bucket, as they are ready. Optimizer step: every rank steps every parameter; under ZeRO-1 each steps only
the parameters it owns and broadcasts them to the others. Bytes are what each rank handed each collective in the
step shown (facts["moved"]), and the buffers' broadcast as DDP sends it (dpviz.engines.ddp.read.traffic); each move
in its kind's colour (dpviz.trace.legend).

`one_step_ranks` is the frame every engine of processes fills with its own collectives and words (FSDP's too).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Callable

import plotly.graph_objects as go

from dpviz.engines.ddp.read.traffic import ddp_step_traffic
from dpviz.analysis.one_step import (
    ALL, COLUMN_KEYS, HUB, Arrow, Cell, OneStep, bytes_note, failed_column, idle, step_heading, stopped, update_cell,
)
from dpviz.analysis.wording import plural
from dpviz.figures.one_step import one_step_figure
from dpviz.figures.arguments import check_batch
from dpviz.figures.trace_words import backend_note
from dpviz.trace import Trace

# A collective, by the name the ranks wrote down (facts["moved"]): (column, the arrow's name, the legend's kind).
COLLECTIVES = {
    "all-reduce": ("backward", "all-reduce", "all-reduce"),
    "broadcast": ("update", "broadcast", "broadcast"),  # ZeRO-1: each owner's updated parameters
}
COLUMN_OF = {"load": "input", "buffers": "forward", "rebuild": "forward", "forward": "forward", "loss": "forward",
             "backward": "backward", "allreduce": "backward", "step": "update", "join": "update"}
HOVERS = {
    "all-reduce": "all-reduce: each rank hands in its gradients, bucket by bucket, and gets every rank's mean back",
    "broadcast": ("broadcast: each rank sends the parameters it stepped (those it owns) and receives the others'; "
                  "the bytes are what it sent"),
}
BUFFERS = "rank 0's buffers (BatchNorm's running statistics) broadcast to every rank before the forward"

Cells = Callable[[Trace, int, int, int], dict[str, Cell]]  # (trace, step, rank, its rows) -> a cell per column


def moved_at(trace: Trace, step: int) -> dict[str, dict[int, int]]:
    """collective -> rank -> the bytes it handed that collective in `step` (facts["moved"])."""
    found: dict[str, dict[int, int]] = defaultdict(dict)
    for rank, rows in enumerate(trace.facts.get("moved") or []):
        for at, collective, _, size in rows or []:
            if at == step:
                found[collective][rank] = found[collective].get(rank, 0) + size
    return found


def held(trace: Trace, rank: int) -> dict:
    """What `rank` held at the end (facts["held"]): its parameters, gradients, optimizer state and what it owns."""
    rows = trace.facts.get("held") or []
    return (rows[rank] if rank < len(rows) else None) or {}


def ddp_cells(trace: Trace, step: int, rank: int, rows: int) -> dict[str, Cell]:
    """What a DDP (or ZeRO-1) rank holds and does in each part of a step."""
    config, name = trace.config, trace.vocabulary.lane_name(rank)
    cells = {
        "input": Cell((plural(rows, "row"), "its own"), hover=f"{name} reads its own rows (its DistributedSampler shard)"),
        "forward": Cell(("own copy", f"forward {rows}") + (("loss",) if config.train else ()),
                        hover=f"{name} runs its own full copy of the model on its {plural(rows, 'row')}"),
    }
    if not config.train:
        cells["backward"] = idle("forward only: turn training on to see the gradients all-reduced")
        cells["update"] = idle("forward only")
        return cells
    cells["backward"] = Cell(("backward", "all grads"), hover=f"{name} computes every parameter's gradient on its {plural(rows, 'row')}")
    mine, model = held(trace, rank), _owned(trace)
    owns, state = mine.get("owns") or [], (mine.get("optimizer state") or {}).get("bytes")
    params = (mine.get("parameters") or {}).get("bytes")
    if len(owns) < len(model):  # the ranks split the parameters (ZeRO-1): each steps its own
        cells["update"] = update_cell(
            trace, rank, f"only the {len(owns)} of {plural(len(model), 'parameter')} it owns "
                         f"({', '.join(n for n, _ in owns) or 'none'})", owned_bytes(trace, rank), state,
            "then it broadcasts them to every other rank")
    else:
        cells["update"] = update_cell(trace, rank, "its own full copy, with the same mean gradients as every rank",
                                      params, state)
    return cells


def owned_bytes(trace: Trace, rank: int) -> int | None:
    """The bytes of the parameters `rank` owns and steps (ZeRO-1's partition), from their elements."""
    mine = held(trace, rank)
    params = mine.get("parameters") or {}
    if not params.get("elements"):
        return None
    return int(sum(elements for _, elements in mine.get("owns") or []) * params["bytes"] / params["elements"])


def _owned(trace: Trace) -> list[str]:
    """Every parameter some rank owns (each once): the model's, when the ranks split them."""
    seen: dict[str, None] = {}
    for rank in range(len(trace.lanes)):
        for param, _ in held(trace, rank).get("owns") or []:
            seen.setdefault(param, None)
    return list(seen)


def one_step_ranks(trace: Trace, step: int, collectives: dict[str, tuple[str, str, str]], cells_of: Cells,
                   hovers: dict[str, str],
                   sent_of: Callable[[Trace, str, dict[int, int]], tuple[dict[int, int], dict[int, int]]] | None = None,
                   handed_words: str = "what each rank handed the collective") -> OneStep:
    """A step of an engine of processes: each rank's cells (`cells_of`), its collectives (`collectives`: what the
    ranks handed each one, facts["moved"]), and the buffers' broadcast DDP's traffic counts; `sent_of` says what a
    rank sends and receives of what it handed a collective (all of it both ways, unless the engine knows better:
    then the arrows say which way, a two-headed one only where a rank does both)."""
    check_batch(trace, step)
    lanes = [lane.id for lane in trace.lanes]
    rows = {s.lane: s.rows for s in trace.spans_of(step, "forward") if s.lane is not None}
    cells: dict[tuple[int, str], Cell] = {}
    failed = failed_column(trace, step, COLUMN_OF)
    for lane in lanes:
        for column, cell in cells_of(trace, step, lane, rows.get(lane, 0)).items():
            cells[(lane, column)] = cell
        if failed is not None and lane not in rows:
            name = trace.vocabulary.lane_name(lane)
            loaded = any(s.lane == lane for s in trace.spans_of(step, "load"))
            for column in COLUMN_KEYS:
                cells[(lane, column)] = idle(f"{name} has no rows for this step: it ran out and waits at the end")
            if loaded:  # the step stopped as this rank's forward began (DDP's own checks raise there)
                failed = "forward" if failed == "input" else failed
                cells[(lane, "input")] = Cell(("loaded",), hover=f"{name} loaded its rows")
                cells[(lane, "forward")] = Cell(("raised",), hover=trace.failure.headline)
    cells = stopped(cells, failed)
    arrows = []
    buffers = [m for m in ddp_step_traffic(trace, step) if m.what == "buffers"]
    if buffers:
        arrows.append(Arrow("forward", "buffers", "broadcast", HUB, {m.lane: m.sent for m in buffers if m.sent},
                            {m.lane: m.received for m in buffers if m.received}, hover=BUFFERS))
    moved = moved_at(trace, step)
    for collective, (column, name, kind) in collectives.items():
        handed = moved.get(collective)
        if handed:
            sent, received = sent_of(trace, collective, handed) if sent_of else (dict(handed), dict(handed))
            shape = ALL if sent == received else HUB
            arrows.append(Arrow(column, name, kind, shape, sent, received, hover=hovers.get(collective, name)))
    # What moves between the ranks is each column's heading (its swatch and name): the title says what a rank reads.
    holds = trace.vocabulary.words.get("one_step_holds")  # an engine's lesson beside DDP's rows (ZeRO-1's shards)
    title = f"{step_heading(trace, step)}: each rank its own rows" + (f" and {holds}" if holds else "")
    notes = (backend_note(trace), bytes_note(trace, step, handed_words))
    return OneStep(title, tuple(trace.vocabulary.lane_name(l) for l in lanes), tuple(lanes), cells, tuple(arrows),
                   notes, failed)


def broadcast_sent(trace: Trace, collective: str, handed: dict[int, int]) -> tuple[dict[int, int], dict[int, int]]:
    """ZeRO-1's broadcast: every rank takes part in every owner's broadcast (it handed each the whole parameters);
    it sends its own parameters and receives the others'. A rank that owns none only receives."""
    if collective != "broadcast":
        return dict(handed), dict(handed)
    sent, received = {}, {}
    for rank, size in handed.items():
        mine = held(trace, rank)
        per = 4  # float32, where the trace does not say
        own = owned_bytes(trace, rank)
        own = own if own is not None else int(sum(elements for _, elements in mine.get("owns") or []) * per)
        if own:
            sent[rank] = own
        if size - own:
            received[rank] = size - own
    return sent, received


def one_step_ddp(trace: Trace, step: int) -> OneStep:
    # ZeRO-1's owners send their shards and receive the others': a rank's figure is the whole it handed the broadcasts
    words = ("what each rank handed each collective, a broadcast's sent and received together"
             if "broadcast" in moved_at(trace, step) else "what each rank handed the collective")
    return one_step_ranks(trace, step, COLLECTIVES, ddp_cells, HOVERS, broadcast_sent, handed_words=words)


def one_step_ddp_figure(trace: Trace, step: int) -> go.Figure:
    """DDP's step (ZeRO-1's too), drawn as every engine's is."""
    return one_step_figure(one_step_ddp(trace, step))
