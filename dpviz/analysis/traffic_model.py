"""Bytes each device sends and receives in one step, from the formulas of DataParallel and DDP, at any count.

    sizes = StepSizes.of(first_trace, second_trace)   # a batch's rows, bytes per row, the model's bytes
    growth(sizes, range(2, 17), trace.spec.part("moves_at"))
                                                      # how an engine's first device and its others grow with the count

Each engine writes its own formula, (sent, received) bytes per device at a device count, as its spec's
`moves_at` part, beside its traffic (dpviz.engines.<engine>.read.traffic).

The same rules an engine's traffic applies to a recorded run, written as formulas of the device count, so the
page can say how two engines scale without running 16 of each. DataParallel, every step: GPU 0 sends
each other used device its chunk of the batch (torch.chunk's sizes) and a copy of the parameters and
buffers, and takes back every output; training, it sends each output's gradient back and receives each
replica's parameter gradients. DDP, every step: a ring all-reduce, in which each rank sends and receives
2(W-1)/W of the gradient bytes; rank 0 also sends its buffers to every other rank before the forward.
tests/test_compare.py checks these against the bytes two real runs moved at 2, 4 and 8 devices.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable

from dpviz.trace import Trace

FLOAT_BYTES = 4  # dpviz's models run in float32


def row_bytes(shape: list[int], rows: int) -> int:
    return math.prod(shape) // rows * FLOAT_BYTES if rows and shape else 0


def model_bytes(trace: Trace) -> tuple[int | None, int | None]:
    """(parameters and buffers, gradients) of the model, from the trace's computed memory ledger."""
    return trace.spec.part("model_bytes")(trace)


@dataclass(frozen=True)
class StepSizes:
    """What one step moves is made of: a full batch's rows, the bytes of a row in and out, the model's bytes."""

    rows: int  # a full batch, as DataParallel gets it (DDP's global batch)
    in_row: int  # bytes of one row of input
    out_row: int  # bytes of one row of output
    parameters: int  # bytes of the parameters and buffers DataParallel copies to each replica
    gradients: int  # bytes of the gradients (what DDP all-reduces)
    train: bool

    @property
    def buffers(self) -> int:
        return max(0, self.parameters - self.gradients)

    @classmethod
    def of(cls, first: Trace, second: Trace | None = None) -> "StepSizes":
        """The sizes of `first`'s fullest batch and of its model (the second run's gradient bytes where it has them:
        a forward-only DataParallel run keeps no gradients to count)."""
        batch = max(first.batches, key=lambda b: b.rows)
        parameters, gradients = model_bytes(first)
        if second is not None and model_bytes(second)[1]:
            gradients = model_bytes(second)[1]
        return cls(batch.rows, row_bytes(batch.input_shape, batch.rows), row_bytes(batch.output_shape, batch.rows),
                   parameters or 0, gradients or 0, first.config.train)


MovesAt = Callable[["StepSizes", int], list[tuple[int, int]]]  # an engine's formula: (sent, received) per device


@dataclass(frozen=True)
class Growth:
    """One engine at one device count: bytes per step that its first device (DataParallel's output device, rank 0)
    and the busiest of its others send (what the Compare figure's bars count, and the Memory page's diamonds)."""

    devices: int
    first: int
    other: int

    @property
    def most(self) -> int:
        return max(self.first, self.other)


def growth(sizes: StepSizes, counts: Iterable[int], moves_at: MovesAt) -> list[Growth]:
    """At each count: the bytes sent by an engine's first device and by the busiest of the others, by its formula."""
    rows = []
    for count in counts:
        sent = [sent for sent, _ in moves_at(sizes, count)]
        rows.append(Growth(count, sent[0] if sent else 0, max(sent[1:], default=0)))
    return rows
