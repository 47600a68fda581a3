"""What a DDP trace's facts hold, read back from a file: every value checked, nothing kept unchecked.

    read_facts(data["facts"]["ddp"])     # {"per_rank_batch": 8, "buckets": [...], "reducer": {...}, ...}

No torch: loading a trace needs none.
"""
from __future__ import annotations

from typing import Any

from dpviz.config import MAX_BATCHES
from dpviz.trace.values import (
    MAX_GROUPS, MAX_DEVICES, MAX_MEMORY_BYTES, MAX_NAME, MAX_ROWS, MAX_SECONDS, TraceError, mapping, number, sequence,
    shown, text_of, whole, wholes,
)

KEYS = ("buckets", "clock_offsets_applied", "clock_offsets_s", "exit_codes", "per_rank_batch", "reducer", "startup_s")
STARTUP = ("ddp", "init", "start")  # seconds: process start, joining the group, DDP's constructor
MAX_PARAMETERS = 4096  # parameter tensors in one bucket: dpviz's models have a few dozen, a user's a few hundred


HELD = ("parameters", "gradients", "optimizer state")  # what a rank holds, by kind: elements and bytes of each
OWNS = "owns"  # the parameters whose optimizer state the rank holds: every one under DDP, its shard under ZeRO-1
# What a rank hands its collectives: DDP's bucket all-reduces, ZeRO-1's broadcasts of each shard, FSDP's all-gathers
# (in forward, and again in backward) and reduce-scatters, tensor parallelism's all-reduces of activations (in forward)
# and of their gradients (in backward). Per rank, [step, collective, calls, bytes] rows.
COLLECTIVES = ("all-reduce", "broadcast", "all-gather (forward)", "all-gather (backward)", "reduce-scatter",
               "all-reduce (forward)", "all-reduce (backward)")
MAX_CALLS = 1_000_000  # collective calls of one kind in one step: a bucket or a module each, a few hundred at most


def read_trace_facts(facts: Any) -> dict[str, Any]:
    """DDP's keys of a loaded trace's facts, checked: its own, what each rank held, and the user's module when
    it ran one."""
    from dpviz.trace.own_model import read_model

    out = {"ddp": read_facts(facts["ddp"])} if "ddp" in facts else {}
    if "held" in facts:
        out["held"] = read_held(facts["held"])
    if "moved" in facts:
        out["moved"] = read_moved(facts["moved"])
    if "model" in facts:
        out["model"] = read_model(facts["model"])
    return out


def read_held(value: Any) -> list[dict[str, Any] | None]:
    """What each rank held at the end of its run (None for a rank that never reported), checked."""
    return [None if rank is None else _held(rank) for rank in sequence(value, "facts held", MAX_DEVICES)]


def read_moved(value: Any) -> list[list[list] | None]:
    """The bytes each rank handed each collective in each step (None for a rank that never reported), checked."""
    ranks = []
    for rank in sequence(value, "facts moved", MAX_DEVICES):
        if rank is None:
            ranks.append(None)
            continue
        rows = []
        for row in sequence(rank, "a rank's collectives", MAX_BATCHES * len(COLLECTIVES)):
            row = sequence(row, "a collective's row", 4)
            if len(row) != 4:
                raise TraceError(f"a collective's row is [step, collective, calls, bytes], got {shown(row)}.")
            collective = text_of(row[1], "a collective", MAX_NAME)
            if collective not in COLLECTIVES:
                raise TraceError(f"a collective is one of {', '.join(COLLECTIVES)}, got {shown(collective)}.")
            rows.append([whole(row[0], "a collective's step", 0, MAX_BATCHES - 1), collective,
                         whole(row[2], "a collective's calls", 1, MAX_CALLS),
                         whole(row[3], "a collective's bytes", 0, MAX_MEMORY_BYTES)])
        ranks.append(rows)
    return ranks


def _held(value: Any) -> dict[str, Any]:
    held = mapping(value, "a rank's held memory")
    if sorted(map(str, held)) != sorted((*HELD, OWNS)):
        raise TraceError(f"a rank's held memory should hold {', '.join(HELD)} and {OWNS}, got {shown(sorted(map(str, held)))}.")
    read: dict[str, Any] = {}
    for kind in HELD:
        amount = mapping(held[kind], f"a rank's held {kind}")
        if sorted(map(str, amount)) != ["bytes", "elements"]:
            raise TraceError(f"a rank's held {kind} should hold elements and bytes, got {shown(sorted(map(str, amount)))}.")
        read[kind] = {"elements": whole(amount["elements"], f"a rank's held {kind} elements", 0, MAX_MEMORY_BYTES),
                      "bytes": whole(amount["bytes"], f"a rank's held {kind} bytes", 0, MAX_MEMORY_BYTES)}
    owns = []
    for pair in sequence(held[OWNS], "a rank's owned parameters", MAX_PARAMETERS):
        pair = sequence(pair, "an owned parameter", 2)
        if len(pair) != 2:
            raise TraceError(f"an owned parameter is [name, elements], got {shown(pair)}.")
        owns.append([text_of(pair[0], "an owned parameter's name", MAX_NAME),
                     whole(pair[1], "an owned parameter's elements", 0, MAX_MEMORY_BYTES)])
    read[OWNS] = owns
    return read


def read_facts(value: Any) -> dict[str, Any]:
    facts = mapping(value, "facts ddp")
    if sorted(map(str, facts)) != sorted(KEYS):
        raise TraceError(f"facts ddp should hold {', '.join(KEYS)}, got {shown(sorted(map(str, facts)))}.")
    return {
        "per_rank_batch": whole(facts["per_rank_batch"], "facts ddp per_rank_batch", 1, MAX_ROWS),
        "buckets": [_layout(layout) for layout in sequence(facts["buckets"], "facts ddp buckets", MAX_BATCHES)],
        "reducer": _reducer(facts["reducer"]),
        "clock_offsets_s": [number(o, "a clock offset", -MAX_SECONDS, MAX_SECONDS)
                            for o in sequence(facts["clock_offsets_s"], "facts ddp clock_offsets_s", MAX_DEVICES)],
        "clock_offsets_applied": [_flag(a) for a in sequence(facts["clock_offsets_applied"], "facts ddp clock_offsets_applied", MAX_DEVICES)],
        "startup_s": [_startup(s) for s in sequence(facts["startup_s"], "facts ddp startup_s", MAX_DEVICES)],
        "exit_codes": [None if c is None else whole(c, "an exit code", -255, 255)
                       for c in sequence(facts["exit_codes"], "facts ddp exit_codes", MAX_DEVICES)],
    }


def _layout(value: Any) -> dict[str, Any]:
    layout = mapping(value, "a bucket layout")
    if sorted(map(str, layout)) != ["buckets", "step"]:
        raise TraceError(f"a bucket layout should hold step and buckets, got {shown(sorted(map(str, layout)))}.")
    buckets = []
    for bucket in sequence(layout["buckets"], "a layout's buckets", MAX_GROUPS):
        bucket = mapping(bucket, "a bucket")
        if sorted(map(str, bucket)) != ["bytes", "index", "params"]:
            raise TraceError(f"a bucket should hold index, params and bytes, got {shown(sorted(map(str, bucket)))}.")
        buckets.append({
            "index": whole(bucket["index"], "a bucket's index", 0, MAX_GROUPS - 1),
            "params": [text_of(p, "a parameter name", MAX_NAME) for p in sequence(bucket["params"], "a bucket's params", MAX_PARAMETERS)],
            "bytes": whole(bucket["bytes"], "a bucket's bytes", 0, MAX_MEMORY_BYTES),
        })
    return {"step": whole(layout["step"], "a bucket layout's step", 0, MAX_BATCHES - 1), "buckets": buckets}


def _reducer(value: Any) -> dict[str, list[int]]:
    reducer = mapping(value, "facts ddp reducer")
    unknown = sorted(set(map(str, reducer)) - {"bucket_sizes", "rebuilt_bucket_sizes"})
    if unknown:
        raise TraceError(f"facts ddp reducer holds {shown(unknown[0])}; it holds bucket_sizes and rebuilt_bucket_sizes.")
    return {name: wholes(sizes, f"facts ddp reducer {name}", 0, MAX_MEMORY_BYTES)[:MAX_GROUPS]
            for name, sizes in reducer.items()}


def _startup(value: Any) -> dict[str, float | None]:
    startup = mapping(value, "a rank's startup")
    unknown = sorted(set(map(str, startup)) - set(STARTUP))
    if unknown:
        raise TraceError(f"a rank's startup holds {shown(unknown[0])}; it holds {', '.join(STARTUP)}.")
    return {k: None if v is None else number(v, f"a rank's {k} time", 0, MAX_SECONDS) for k, v in startup.items()}


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TraceError(f"a clock offset is applied or not (true or false), got {shown(value)}.")
    return value
