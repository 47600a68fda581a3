"""The lines the tutorial prints, rebuilt from a trace in the tutorial's exact format.

A DistributedDataParallel trace gets the same log in the tutorial's spirit: each step opens with what it
held and what crossed between the ranks ("Step 1 of 4: 32 rows on 4 ranks, ..."), then each rank prints
the sizes its forward saw ("rank 2: input size torch.Size([8, 5]) output size torch.Size([8, 2])"), in
the order the ranks finished.
"""
from __future__ import annotations

from dpviz.trace import Trace


def size_text(shape: list[int] | None) -> str:
    return f"torch.Size([{', '.join(str(n) for n in shape or [])}])"


def header(trace: Trace) -> str | None:
    """The log's first line, in its engine's words; None when it prints none."""
    return trace.spec.part("log_header")(trace)


def tutorial_log(trace: Trace) -> str:
    """The whole printed output of the run, ending with a newline, as its engine prints it."""
    return trace.spec.part("log")(trace)


def warnings_and_failure(trace: Trace, batch: int) -> list[str]:
    lines = [f"{w.category}: {w.message}" for w in trace.warnings if w.batch == batch]
    failure = trace.failure
    if failure is not None and failure.batch == batch:
        lines += ["Traceback (most recent call last):", "  ...", *failure.printed.splitlines()]
    return lines
