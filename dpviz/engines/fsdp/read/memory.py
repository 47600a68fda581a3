"""The Memory view's caption for FSDP: each rank holds 1/W of every parameter (its own rows of dim 0, as FSDP2 cuts
them), with the gradients and the optimizer state of that shard only; the figures read from the trace's facts.

    sharded_why(trace, table, unit)   # the spec's `memory_why`

FSDP2 gives rank r rows r·c to (r+1)·c of a parameter of d rows, c = ceil(d / W): the last ranks may hold fewer
real rows (none, past the last), and FSDP2 pads their shards to c rows, so every rank allocates c rows of each
parameter, and of its gradient (dpviz.engines.fsdp.plan).
"""
from __future__ import annotations

import pandas as pd

from dpviz.figures.byte_unit import ByteUnit
from dpviz.engines.fsdp.read import mesh_text as mesh
from dpviz.figures.memory_lead import fullest_lead
from dpviz.trace import Trace


def sharded_why(trace: Trace, table: pd.DataFrame, unit: ByteUnit) -> str:
    """How much the ranks hold at their fullest, then what each holds of the model: its shard."""
    k = len(trace.lanes)
    if mesh.on_mesh(trace):
        return _mesh_why(trace, table, unit)
    text = (fullest_lead(trace, table, unit) + f"<br>Each rank holds about 1/{k} of every parameter: its own rows of "
            f"dim 0,<br>ceil(rows/{k}) a rank, the last ranks' fewer real rows padded to as many (every rank allocates alike)")
    held = trace.facts.get("held")
    if held and None not in held:
        mine = [rank["parameters"]["elements"] for rank in held]
        model = sum(mine)
        most = trace.vocabulary.lane_name(mine.index(max(mine)))
        text += (f":<br>here {mine[0]:,} of the model's {model:,} parameter elements, each rank the same"
                 if len(set(mine)) == 1 else
                 f":<br>here {min(mine):,} to {max(mine):,} of the model's {model:,} parameter elements "
                 f"({most} the most)")
    if trace.config.train:
        text += ",<br>with the gradients and the optimizer state of its shard only"
    whole = ("from its forward to its backward (reshard_after_forward=False)" if not trace.config.reshard_after_forward
             else "while it runs")
    return text + f".<br>A module's parameters are whole only {whole}: the gathered parameters."


def _mesh_why(trace: Trace, table: pd.DataFrame, unit: ByteUnit) -> str:
    """On a mesh: a rank's share of what tensor parallelism splits and of what it leaves whole, from its local shapes."""
    dp, tp = mesh.mesh_degrees(trace)
    mine = mesh.holdings(trace)
    text = (fullest_lead(trace, table, unit) + f"<br>On the {dp} {mesh.DP_SHARD} × {tp} {mesh.TP} mesh each rank holds "
            f"1/{dp * tp} of each parameter tensor parallelism splits<br>(1/{tp} by tensor parallelism, then 1/{dp} of "
            f"that slice by FSDP: here {mine.split.held:,} of {mine.split.whole:,} elements on rank 0)")
    if mine.whole.names:
        text += (f"<br>and 1/{dp} of the parts it leaves whole (FSDP over {mesh.DP_SHARD} only: "
                 f"{mine.whole.held:,} of {mine.whole.whole:,})")
    if trace.config.train:
        text += ",<br>with the gradients and the optimizer state of its shards only"
    return text + ".<br>A module's slices are whole only while it runs: the gathered parameters."
