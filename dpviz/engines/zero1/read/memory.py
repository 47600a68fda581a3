"""The Memory view's caption for ZeRO-1: every rank holds the whole model, as under DDP, and the optimizer's state
only for the parameters it owns, about 1/W of it, uneven by whole parameters; the split read from the trace's facts.

    sharded_state_why(trace, table, unit)   # the spec's `memory_why`
"""
from __future__ import annotations

import pandas as pd

from dpviz.engines.zero1.read.shards import shards, split_text
from dpviz.figures.byte_unit import ByteUnit
from dpviz.figures.memory_lead import amount, fullest_lead
from dpviz.trace import Trace


def sharded_state_why(trace: Trace, table: pd.DataFrame, unit: ByteUnit) -> str:
    """How much the ranks hold at their fullest, then who holds what of the optimizer's state."""
    lead = fullest_lead(trace, table, unit)
    k = len(trace.lanes)
    found = shards(trace)
    if found is None:
        forward = ("<br>Forward only: no optimizer, so no state to shard;"
                   "<br>each rank holds its own whole copy of the model.")
        return lead + ("" if trace.config.train else forward)
    states = [s.state_bytes for s in found]
    total = amount(unit, sum(states))
    split = (f"exactly 1/{k} each, {amount(unit, states[0])} of {total}" if len(set(states)) == 1 else
             f"uneven by whole parameters: {split_text(found, lambda n: amount(unit, n))} (of {total})")
    return (lead + "<br>Each rank holds the whole model's parameters and gradients, as a DDP rank does,"
            f"<br>but optimizer state only for the parameters it owns: about 1/{k} of it,<br>{split}.")


def sharded_step(trace: Trace) -> int:
    """The step Memory opens on: the first sampled one whose ranks hold optimizer state all through it, each its own
    shard (in the first step the state is made only by its optimizer step, and the ranks hold the same until then)."""
    held: dict[int, set[int]] = {}
    for m in trace.memory:
        if m.category == "optimizer state" and m.bytes and m.phase != "step":
            held.setdefault(m.batch, set()).add(m.lane)
    lanes = {lane.id for lane in trace.lanes}
    sharded = [batch for batch, holding in sorted(held.items()) if holding == lanes]
    return sharded[0] if sharded else max((m.batch for m in trace.memory), default=0)
