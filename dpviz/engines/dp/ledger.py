"""Memory per device after each phase of DataParallel: measured on real GPUs, computed from tensor sizes when
simulated.

Simulated devices share the CPU's memory, so `ComputedMemory` keeps a ledger instead: the byte size
of every tensor DataParallel leaves on each device (parameters, the copies replicate makes, the batch
and its chunks, activations, the gathered output, the loss, gradients, optimiser state), held and
dropped at the points where DataParallel creates and frees them. `MeasuredMemory` asks CUDA.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable

import torch

from dpviz.engines.dp.vocabulary import VOCABULARY
from dpviz.trace import MemorySample

CATEGORIES = VOCABULARY.memory_names  # the kinds of tensor the ledger keeps, as the vocabulary declares them
MEASURED = VOCABULARY.measured_memory  # the one category of a real GPU's figure: torch.cuda.memory_allocated


class ComputedMemory:
    """A ledger of what each simulated device holds."""

    kind = "computed"

    def __init__(self, lanes: Iterable[int]):
        self.lanes = list(lanes)
        self.held: dict[tuple[int, str], int] = defaultdict(int)

    def hold(self, lane: int, category: str, size: int) -> None:
        self.held[(lane, category)] += size

    def drop(self, *categories: str) -> None:
        for key in [k for k in self.held if k[1] in categories]:
            del self.held[key]

    def drop_lane(self, lane: int, category: str) -> None:
        self.held.pop((lane, category), None)

    def snapshot(self, batch: int, phase: str) -> list[MemorySample]:
        return [
            MemorySample(batch, phase, lane, category, self.held[(lane, category)])
            for lane in self.lanes for category in CATEGORIES if self.held.get((lane, category))
        ]


class MeasuredMemory(ComputedMemory):
    """Real GPUs: what the caching allocator has handed out on each device, after the phase."""

    kind = "measured"

    def hold(self, lane: int, category: str, size: int) -> None:
        pass

    def snapshot(self, batch: int, phase: str) -> list[MemorySample]:
        return [MemorySample(batch, phase, lane, MEASURED, torch.cuda.memory_allocated(lane)) for lane in self.lanes]
