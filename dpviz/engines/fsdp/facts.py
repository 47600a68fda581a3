"""What an FSDP trace's facts hold, read back from a file: DDP's, and the sharded modules, every value checked.

    read_trace_facts_fsdp(data["facts"])
    # {..., "modules": [[{"index": 0, "name": "net.0", "params": ["net.0.weight", ...], "held": 520}, ...], ...]}

`modules` is per rank (None for a rank that never reported): each sharded module, by its index (the `bucket` of
its spans), its name, the parameters it gathers and how many elements of them the rank holds (its shards).
No torch: loading a trace needs none.
"""
from __future__ import annotations

from typing import Any

from dpviz.engines.ddp.facts import MAX_PARAMETERS, read_trace_facts
from dpviz.trace.values import (MAX_GROUPS, MAX_DEVICES, MAX_MEMORY_BYTES, MAX_NAME, TraceError, mapping, sequence,
                                shown, text_of, whole)

MODULE_KEYS = ["held", "index", "name", "params"]


def read_trace_facts_fsdp(facts: Any) -> dict[str, Any]:
    out = read_trace_facts(facts)
    if "modules" in facts:
        out["modules"] = [None if rank is None else read_modules(rank)
                          for rank in sequence(facts["modules"], "facts modules", MAX_DEVICES)]
    return out


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
