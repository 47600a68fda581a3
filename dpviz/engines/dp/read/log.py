"""A DataParallel run's log in the tutorial's own lines: 'In Model: input size ...' per replica, 'Outside: ...' per batch."""
from __future__ import annotations

from dpviz.trace import Trace
from dpviz.exports.tutorial_log import size_text
from dpviz.exports.tutorial_log import warnings_and_failure


def header_dp(trace: Trace) -> str | None:
    """The tutorial's "Let's use N GPUs!" line; it prints none for a single device."""
    if trace.config.gpus < 2:
        return None
    line = f"Let's use {trace.config.gpus} GPUs!"
    return line + " (simulated: CPU threads stand in for the GPUs)" if trace.simulated else line


def batch_lines(trace: Trace, batch: int) -> list[str]:
    """One batch: each replica's line in the order the replicas finished, the warnings it raised
    first (as Python shows a warning once), then the outside line, or the error that ended the run."""
    # A replica that failed printed nothing: its forward never got to the print.
    finished = [s for s in trace.replicas(batch) if s.order is not None]
    replicas = sorted(finished, key=lambda s: s.order)
    lines = [
        f"\tIn Model: input size {size_text(s.input_shape)} output size {size_text(s.output_shape)}" for s in replicas
    ]
    lines += warnings_and_failure(trace, batch)
    if trace.failure is not None and trace.failure.batch == batch:
        return lines
    b = trace.batches[batch]
    lines.append(f"Outside: input size {size_text(b.input_shape)} output_size {size_text(b.output_shape)}")
    return lines


def tutorial_log_dp(trace: Trace) -> str:
    """What the tutorial prints: a line per replica and one outside, batch by batch."""
    first = header_dp(trace)
    lines = [first] if first else []
    for batch in trace.batches:
        lines.extend(batch_lines(trace, batch.index))
    return "\n".join(lines) + "\n"
