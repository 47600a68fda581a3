"""What an FSDP trace's facts hold, read back from a file: DDP's, and the sharded modules, every value checked.

    read_trace_facts_fsdp(data["facts"])
    # {..., "modules": [[{"index": 0, "name": "net.0", "params": ["net.0.weight", ...], "held": 520}, ...], ...]}

`modules` is per rank (None for a rank that never reported): each sharded module, by its index (the `bucket` of
its spans), its name, the parameters it gathers and how many elements of them the rank holds (its shards).
A run on a mesh (FSDP × TP) adds, per rank and for its last step, `comm_counts` (CommDebugMode's tally, as the tp
engine writes it), `comm_groups`: [collective, the ranks of the group it ran in, count], and `shares`: each
parameter as DTensor places it on the rank, [name, its placements per mesh dimension, local shape, whole shape].
No torch: loading a trace needs none.
"""
from __future__ import annotations

from typing import Any

from dpviz.engines.ddp.facts import MAX_CALLS, MAX_PARAMETERS, read_trace_facts
from dpviz.engines.tp.facts import read_counts
from dpviz.trace.values import (MAX_GROUPS, MAX_DEVICES, MAX_MEMORY_BYTES, MAX_NAME, TraceError, mapping, sequence,
                                shown, text_of, whole)

MODULE_KEYS = ["held", "index", "name", "params"]


def read_trace_facts_fsdp(facts: Any) -> dict[str, Any]:
    out = read_trace_facts(facts)
    if "modules" in facts:
        out["modules"] = [None if rank is None else read_modules(rank)
                          for rank in sequence(facts["modules"], "facts modules", MAX_DEVICES)]
    for key, read in (("comm_counts", read_counts), ("comm_groups", read_groups), ("shares", read_shares)):
        if key in facts:
            out[key] = [None if rank is None else read(rank) for rank in sequence(facts[key], f"facts {key}", MAX_DEVICES)]
    return out


def read_groups(value: Any) -> list[list]:
    """One rank's collectives by group: [collective, its group's ranks (ascending, at least 1), count]."""
    rows = []
    for row in sequence(value, "a rank's collectives by group", MAX_GROUPS):
        row = sequence(row, "a collective's group", 3)
        if len(row) != 3:
            raise TraceError(f"a collective's group is [collective, ranks, count], got {shown(row)}.")
        ranks = [whole(r, "a rank of a group", 0, MAX_DEVICES - 1) for r in sequence(row[1], "a group's ranks", MAX_DEVICES)]
        if not ranks or ranks != sorted(set(ranks)):
            raise TraceError(f"a group's ranks are named once each, in order, got {shown(ranks)}.")
        rows.append([text_of(row[0], "a collective", MAX_NAME), ranks, whole(row[2], "a collective's count", 1, MAX_CALLS)])
    return rows


def read_modules(value: Any) -> list[dict[str, Any]]:
    """One rank's sharded modules, in the order of their index."""
    modules = []
    for module in sequence(value, "a rank's sharded modules", MAX_GROUPS):
        module = mapping(module, "a sharded module")
        if sorted(map(str, module)) != MODULE_KEYS:
            raise TraceError(f"a sharded module should hold {', '.join(MODULE_KEYS)}, got {shown(sorted(map(str, module)))}.")
        modules.append({
            "index": whole(module["index"], "a sharded module's index", 0, MAX_GROUPS - 1),
            "name": text_of(module["name"], "a sharded module's name", MAX_NAME),
            "params": [text_of(p, "a parameter name", MAX_NAME)
                       for p in sequence(module["params"], "a sharded module's params", MAX_PARAMETERS)],
            "held": whole(module["held"], "a sharded module's held elements", 0, MAX_MEMORY_BYTES),
        })
    if [m["index"] for m in modules] != sorted({m["index"] for m in modules}):
        raise TraceError("a rank's sharded modules should be named once each, in the order of their index.")
    return modules


def read_shares(value: Any) -> list[list]:
    """One rank's parameters as DTensor places them: [name, placements, local shape, whole shape], the local shape
    no larger than the whole, dim by dim."""
    rows = []
    for row in sequence(value, "a rank's parameter shares", MAX_PARAMETERS):
        row = sequence(row, "a parameter's share", 4)
        if len(row) != 4:
            raise TraceError(f"a parameter's share is [name, placements, local shape, whole shape], got {shown(row)}.")
        local, full = ([whole(n, "a shape's size", 0, MAX_MEMORY_BYTES) for n in sequence(shape, "a shape", 8)]
                       for shape in row[2:])
        if len(local) != len(full) or any(a > b for a, b in zip(local, full)):
            raise TraceError(f"a parameter's local shape {shown(local)} does not fit in its whole shape {shown(full)}.")
        placements = [text_of(p, "a placement", MAX_NAME) for p in sequence(row[1], "a parameter's placements", 8)]
        rows.append([text_of(row[0], "a parameter name", MAX_NAME), placements, local, full])
    return rows
