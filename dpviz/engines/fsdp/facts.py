"""What an FSDP trace's facts hold, read back from a file: DDP's, and the sharded modules, every value checked.

    read_trace_facts_fsdp(data["facts"])   # {..., "modules": [{"index": 0, "name": "net.0", "params": [...]}]}

No torch: loading a trace needs none.
"""
from __future__ import annotations

from typing import Any

from dpviz.engines.ddp.facts import MAX_PARAMETERS, read_trace_facts
from dpviz.trace.values import MAX_BUCKETS, MAX_NAME, TraceError, mapping, sequence, shown, text_of, whole

MODULE_KEYS = ["index", "name", "params"]


def read_trace_facts_fsdp(facts: Any) -> dict[str, Any]:
    out = read_trace_facts(facts)
    if "modules" in facts:
        out["modules"] = read_modules(facts["modules"])
    return out


def read_modules(value: Any) -> list[dict[str, Any]]:
    """Each sharded module: its index (the `bucket` of its spans), its name, the parameters it gathers."""
    modules = []
    for module in sequence(value, "facts modules", MAX_BUCKETS):
        module = mapping(module, "a sharded module")
        if sorted(map(str, module)) != MODULE_KEYS:
            raise TraceError(f"a sharded module should hold {', '.join(MODULE_KEYS)}, got {shown(sorted(map(str, module)))}.")
        modules.append({
            "index": whole(module["index"], "a sharded module's index", 0, MAX_BUCKETS - 1),
            "name": text_of(module["name"], "a sharded module's name", MAX_NAME),
            "params": [text_of(p, "a parameter name", MAX_NAME)
                       for p in sequence(module["params"], "a sharded module's params", MAX_PARAMETERS)],
        })
    if [m["index"] for m in modules] != sorted({m["index"] for m in modules}):
        raise TraceError("facts modules should name each sharded module once, in the order of their index.")
    return modules
