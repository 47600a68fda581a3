"""How every view names what a trace holds: a device ("GPU 3"), the rows of a batch it got, whether its
devices were real or simulated, a phase's label in a legend, where a process engine's ranks ran.

A name read from a trace file is cut to NAME_LIMIT characters wherever a view shows it.
"""
from __future__ import annotations

from dpviz.analysis.wording import plain_label, plural  # noqa: F401  plain_label read from here too
from dpviz.echo import plotly_text
from dpviz.trace import Trace

NAME_LIMIT = 40  # characters of a name from a trace file (a device, an argument) in a label or a title


def device_name(i: int) -> str:
    """How every view names device `i` of device_ids."""
    return f"GPU {i}"


def rows_span(first: int, rows: int) -> str:
    """'rows 12-15': the slice of a batch starting at row `first`, without its count."""
    if rows == 0:
        return "no rows"
    return f"row {first}" if rows == 1 else f"rows {first}-{first + rows - 1}"


def rows_text(first: int, rows: int) -> str:
    """'rows 12-15 (4 rows)': the slice of a batch starting at row `first`."""
    if rows == 0:
        return "no rows"
    return f"{rows_span(first, rows)} ({plural(rows, 'row')})"


def backend_note(trace: Trace) -> str:
    """Says once per figure whether the GPUs were real or simulated, or that the lanes are DDP's processes
    (HTML-escaped: plotly and the report read HTML)."""
    return trace.spec.part("note")(trace)


def gpu_note(trace: Trace) -> str:
    """'simulated GPUs: CPU threads stand in for 4 devices', or the real GPUs' model."""
    count = len(trace.lanes)
    if trace.simulated:
        return f"simulated GPUs: CPU threads stand in for {plural(count, 'device')}"
    model = trace.lanes[0].name.split(" ", 1)[-1] if trace.lanes else "CUDA"
    return f"real GPUs: {count} × {plotly_text(model, NAME_LIMIT)}"  # a trace file's own text


def where_ranks_ran(trace: Trace) -> str:
    """Where a process engine's ranks ran, as every explanation says it."""
    if trace.backend == "cuda":
        return "each on its own GPU, talking over NCCL"
    return "on this machine's CPU, talking over gloo (no GPU was used, none simulated)"


def time_sharing(trace: Trace) -> str:
    """The sentence (with its leading space) that says a CPU run's times measure the host's time-sharing; "" else."""
    k = len(trace.lanes)
    if k < 2 or trace.backend != "cpu":
        return ""
    return (f" The {k} processes share the machine's few CPU cores, so the measured times show time-sharing "
            "more than the cost of the work or of communication.")
