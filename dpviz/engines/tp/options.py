"""Tensor parallelism's own settings: the ones every process engine shares (epochs, the collectives' timeout, the
optimizer). Every rank loads the whole batch, so DDP's sampler and reducer settings mean nothing here."""
from __future__ import annotations

from dataclasses import dataclass

from dpviz.engines.ddp.options import DdpOptions
from dpviz.engines.spec import same


@dataclass(frozen=True)
class TpOptions:
    epochs: int = same(DdpOptions, "epochs")
    timeout_s: int = same(DdpOptions, "timeout_s")
    optimizer: str = same(DdpOptions, "optimizer")
