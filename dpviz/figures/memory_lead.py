"""The first line of a Memory view's caption: what the lanes hold at their fullest, and which holds the most.

    fullest_lead(trace, table, unit)
    # '<b>At their fullest (after loss) the ranks hold 568 B, each rank the same.</b>'
    # '<b>At their fullest the ranks hold 576 B to 608 B (rank 0 the most).</b>'

Amounts are written in the figure's own unit (dpviz.figures.byte_unit); lanes whose peaks read the same in it are
"the same", never "149 KiB to 149 KiB (rank 0 the most)".
"""
from __future__ import annotations

import pandas as pd

from dpviz.analysis.wording import human_bytes
from dpviz.figures.byte_unit import ByteUnit
from dpviz.trace import Trace


def fullest_lead(trace: Trace, table: pd.DataFrame, unit: ByteUnit) -> str:
    """The caption's bold first line from a memory table (dpviz.figures.memory.prepare_memory) in `unit`."""
    vocabulary = trace.vocabulary
    noun = vocabulary.lane_noun
    peaks = table.groupby("device")["total"].max()
    most, least = int(peaks.max()), int(peaks.min())
    if unit.amount(most) == unit.amount(least):
        at = table.loc[table["total"].idxmax(), "step"]
        within = "" if most == least else f" (to within {human_bytes(most - least)})"
        return (f"<b>At their fullest (after {at}) the {noun}s hold {unit.amount(most)}, "
                f"each {noun} the same{within}.</b>")
    return (f"<b>At their fullest the {noun}s hold {unit.amount(least)} to {unit.amount(most)}"
            f" ({vocabulary.lane_name(int(peaks.idxmax()))} the most).</b>")


def amount(unit: ByteUnit, n: int) -> str:
    """`n` bytes in the figure's unit, or in its own when the unit would make it a sliver ("<0.01 KiB")."""
    text = unit.amount(n)
    return human_bytes(n) if text.startswith("<") else text
