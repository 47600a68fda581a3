"""The checks a view makes of what it is asked to draw: a batch number the trace holds."""
from __future__ import annotations

from dpviz.trace import Trace


def check_batch(trace: Trace, batch: int) -> None:
    """Raise ValueError naming the batch and the valid range if `batch` is not in the trace."""
    count = len(trace.batches)
    if isinstance(batch, bool) or not isinstance(batch, int) or not 0 <= batch < count:
        raise ValueError(f"batch must be between 0 and {count - 1}, got {batch!r}")
