"""What a DataParallel trace's facts hold, read back from a file: every value checked, nothing kept unchecked.

    read_facts(data["facts"])     # {"threads": "reused", "threads_at_once": 2, "state": {...}, "losses": [...]}, the keys present

No torch: loading a trace needs none.
"""
from __future__ import annotations

from typing import Any, Mapping

from dpviz.config import MAX_BATCHES
from dpviz.trace.own_model import read_model
from dpviz.trace.values import (
    MAX_DEVICES, MAX_LOSS, MAX_LOSS_SAMPLES, MAX_ROWS, TraceError, choice_of, mapping, number, sequence, shown,
    whole, wholes,
)

LOSS_KEYS = ["batch", "chunk_rows", "gathered", "whole"]


def read_facts(facts: Mapping[str, Any]) -> dict[str, Any]:
    """DataParallel's keys of `facts`, those present: replica threads, state changed in forward, losses per GPU."""
    out: dict[str, Any] = {}
    if "threads" in facts:  # simulated DataParallel: replica threads reused from call to call
        out["threads"] = choice_of(facts["threads"], "facts threads", ("reused",))
    if "threads_at_once" in facts:  # ...and how many at most ran a call's replicas (one per core)
        out["threads_at_once"] = whole(facts["threads_at_once"], "facts threads_at_once", 1, MAX_DEVICES)
    if "state" in facts:  # a counter a forward changed: {name: [after the run, one device]}
        state = mapping(facts["state"], "facts state")
        if state and sorted(state) != ["calls", "rows_seen"]:
            raise TraceError(f"facts state should hold 'calls' and 'rows_seen', got {shown(sorted(map(str, state))[0])}.")
        out["state"] = {}
        for name, pair in state.items():
            if len(wholes(pair, f"facts state {name!r}", 0, MAX_ROWS)) != 2:
                raise TraceError(f"facts state {name!r} should be [after the run, one device], got {shown(pair)}.")
            out["state"][name] = list(pair)
    if "losses" in facts:  # a loss returned by forward: one per GPU, gathered
        out["losses"] = [_loss(loss) for loss in sequence(facts["losses"], "facts losses", MAX_LOSS_SAMPLES)]
    if "model" in facts:  # the user's own module: its class, parameter counts and batch layout
        out["model"] = read_model(facts["model"])
    return out


def _loss(loss: Any) -> dict[str, Any]:
    """One loss sample: the gathered per-replica losses, their chunks' rows and the whole batch's loss."""
    mapping(loss, "a loss sample")
    if sorted(map(str, loss)) != LOSS_KEYS:
        raise TraceError(f"a loss sample should hold {', '.join(LOSS_KEYS)}, got {shown(sorted(map(str, loss)))}.")
    gathered = sequence(loss["gathered"], "gathered losses", MAX_DEVICES)
    for value in gathered:
        number(value, "a gathered loss", -MAX_LOSS, MAX_LOSS)
    rows = wholes(loss["chunk_rows"], "loss chunk_rows", 0, MAX_ROWS)
    if not gathered or len(rows) != len(gathered):
        raise TraceError("a loss sample needs one gathered loss per chunk, and at least one.")
    return {"batch": whole(loss["batch"], "loss batch", 0, MAX_BATCHES - 1), "gathered": list(gathered),
            "chunk_rows": list(rows), "whole": number(loss["whole"], "the whole-batch loss", -MAX_LOSS, MAX_LOSS)}
