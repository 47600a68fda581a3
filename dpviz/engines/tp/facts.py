"""What a tensor-parallel trace's facts hold, read back from a file: DDP's, the cut modules and CommDebugMode's
counts, every value checked.

    read_trace_facts_tp(data["facts"])
    # {..., "cut_modules": [[{"index": 0, "name": "net.0", "style": "colwise"}, ...], ...],
    #       "comm_counts": [[["net.2", "forward", "all_reduce", 1], ...], ...]}

Both are per rank (None for a rank that never reported): `modules` names each cut module by its index (the group of
its spans); `comm_counts` is torch's CommDebugMode's tally of the rank's last step: module, pass, collective, count.
No torch: loading a trace needs none.
"""
from __future__ import annotations

from typing import Any

from dpviz.engines.ddp.facts import MAX_CALLS, read_trace_facts
from dpviz.splitting import STYLES
from dpviz.trace.values import MAX_DEVICES, MAX_GROUPS, MAX_NAME, TraceError, mapping, sequence, shown, text_of, whole

MODULE_KEYS = ["index", "name", "style"]
PASSES = ("forward", "backward")


def read_trace_facts_tp(facts: Any) -> dict[str, Any]:
    out = read_trace_facts(facts)
    # In the order a run writes them (its own keys sorted): a file reads back as it was written.
    if "comm_counts" in facts:
        out["comm_counts"] = [None if rank is None else read_counts(rank)
                              for rank in sequence(facts["comm_counts"], "facts comm_counts", MAX_DEVICES)]
    if "cut_modules" in facts:
        out["cut_modules"] = [None if rank is None else read_modules(rank)
                          for rank in sequence(facts["cut_modules"], "facts cut_modules", MAX_DEVICES)]
    return out


def read_modules(value: Any) -> list[dict[str, Any]]:
    """One rank's cut modules, in the order of their index."""
    modules = []
    for module in sequence(value, "a rank's cut modules", MAX_GROUPS):
        module = mapping(module, "a cut module")
        if sorted(map(str, module)) != MODULE_KEYS:
            raise TraceError(f"a cut module should hold {', '.join(MODULE_KEYS)}, got {shown(sorted(map(str, module)))}.")
        style = text_of(module["style"], "a cut module's style", MAX_NAME)
        if style not in STYLES:
            raise TraceError(f"a cut module's style is one of {', '.join(STYLES)}, got {shown(style)}.")
        modules.append({"index": whole(module["index"], "a cut module's index", 0, MAX_GROUPS - 1),
                        "name": text_of(module["name"], "a cut module's name", MAX_NAME), "style": style})
    if [m["index"] for m in modules] != list(range(len(modules))):
        raise TraceError("a rank's cut modules should be numbered 0, 1, 2, ... in order.")
    return modules


def read_counts(value: Any) -> list[list]:
    """One rank's CommDebugMode rows: [module, pass, collective, count]."""
    rows = []
    for row in sequence(value, "a rank's collective counts", MAX_GROUPS * 4):
        row = sequence(row, "a collective count", 4)
        if len(row) != 4 or row[1] not in PASSES:
            raise TraceError(f"a collective count is [module, forward or backward, collective, count], got {shown(row)}.")
        rows.append([text_of(row[0], "a module", MAX_NAME), row[1], text_of(row[2], "a collective", MAX_NAME),
                     whole(row[3], "a collective's count", 1, MAX_CALLS)])
    return rows
