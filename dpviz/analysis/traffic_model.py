"""Bytes each device sends and receives in one step, from the formulas of DataParallel and DDP, at any count.

    sizes = StepSizes.of(dp_trace, ddp_trace)     # a batch's rows, bytes per row, the model's bytes
    dataparallel(sizes, devices=8)                # [(sent, received)] per GPU: GPU 0 first
    distributed(sizes, ranks=8)                   # [(sent, received)] per rank
    growth(sizes, range(2, 17))                   # how GPU 0's load and a rank's grow with the count

The same rules dpviz.analysis.compare applies to a recorded run, written as formulas of the device count, so the
page can say how both engines scale without running 16 of each. DataParallel, every step: GPU 0 sends
each other used device its chunk of the batch (torch.chunk's sizes) and a copy of the parameters and
buffers, and takes back every output; training, it sends each output's gradient back and receives each
replica's parameter gradients. DDP, every step: a ring all-reduce, in which each rank sends and receives
2(W-1)/W of the gradient bytes; rank 0 also sends its buffers to every other rank before the forward.
tests/test_compare.py checks these against the bytes two real runs moved at 2, 4 and 8 devices.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from dpviz.analysis.compare import model_bytes, row_bytes
from dpviz.engines.dp.chunking import chunk_sizes
from dpviz.trace import Trace


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
    def of(cls, dp: Trace, ddp: Trace | None = None) -> "StepSizes":
        """The sizes of `dp`'s first full batch and of its model (DDP's gradient bytes where it ran)."""
        batch = max(dp.batches, key=lambda b: b.rows)
        parameters, gradients = model_bytes(dp)
        if ddp is not None and model_bytes(ddp)[1]:
            gradients = model_bytes(ddp)[1]
        return cls(batch.rows, row_bytes(batch.input_shape, batch.rows), row_bytes(batch.output_shape, batch.rows),
                   parameters or 0, gradients or 0, dp.config.train)


def dataparallel(sizes: StepSizes, devices: int) -> list[tuple[int, int]]:
    """(sent, received) bytes per GPU in one step of a full batch; GPUs torch.chunk leaves idle move nothing."""
    chunks = chunk_sizes(sizes.rows, devices)
    moves = [(0, 0)] * devices
    sent0 = received0 = 0
    for device, rows in enumerate(chunks[1:], start=1):  # chunk 0 stays on GPU 0, beside the module itself
        down = rows * sizes.in_row + sizes.parameters + (rows * sizes.out_row if sizes.train else 0)
        up = rows * sizes.out_row + (sizes.gradients if sizes.train else 0)
        moves[device] = (up, down)
        sent0, received0 = sent0 + down, received0 + up
    moves[0] = (sent0, received0)
    return moves


def distributed(sizes: StepSizes, ranks: int) -> list[tuple[int, int]]:
    """(sent, received) bytes per rank in one step (training: the all-reduce; every forward: the buffers)."""
    if ranks < 2:
        return [(0, 0)] * ranks
    share = round(2 * (ranks - 1) / ranks * sizes.gradients) if sizes.train else 0
    moves = [(share, share + sizes.buffers) for _ in range(ranks)]
    moves[0] = (share + sizes.buffers * (ranks - 1), share)
    return moves


@dataclass(frozen=True)
class Growth:
    """At one device count: bytes per step through DataParallel's GPU 0, its busiest other GPU, and DDP's busiest rank."""

    devices: int
    gpu0: int
    other_gpu: int
    rank: int


def growth(sizes: StepSizes, counts: Iterable[int]) -> list[Growth]:
    rows = []
    for count in counts:
        dp = [sent + received for sent, received in dataparallel(sizes, count)]
        ddp = [sent + received for sent, received in distributed(sizes, count)]
        rows.append(Growth(count, dp[0], max(dp[1:], default=0), max(ddp, default=0)))
    return rows
