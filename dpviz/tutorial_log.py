"""The lines the tutorial prints, rebuilt from a trace in the tutorial's exact format."""
from __future__ import annotations

from .trace import Trace


def _size(shape: list[int] | None) -> str:
    return f"torch.Size([{', '.join(str(n) for n in shape or [])}])"


def header(trace: Trace) -> str | None:
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
        f"\tIn Model: input size {_size(s.input_shape)} output size {_size(s.output_shape)}" for s in replicas
    ]
    lines += [f"{w.category}: {w.message}" for w in trace.warnings if w.batch == batch]
    failure = trace.failure
    if failure is not None and failure.batch == batch:
        lines += ["Traceback (most recent call last):", "  ...", f"{failure.type}: {failure.message}"]
        return lines
    b = trace.batches[batch]
    lines.append(f"Outside: input size {_size(b.input_shape)} output_size {_size(b.output_shape)}")
    return lines


def tutorial_log(trace: Trace) -> str:
    """The whole printed output of the run, ending with a newline."""
    first = header(trace)
    lines = [first] if first else []
    for batch in trace.batches:
        lines.extend(batch_lines(trace, batch.index))
    return "\n".join(lines) + "\n"
