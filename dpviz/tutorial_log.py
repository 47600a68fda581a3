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
    """One batch: each replica's line in the order the replicas finished, then the outside line."""
    replicas = sorted(trace.replicas(batch), key=lambda s: s.order if s.order is not None else 0)
    lines = [
        f"\tIn Model: input size {_size(s.input_shape)} output size {_size(s.output_shape)}" for s in replicas
    ]
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
