"""DataParallel's own settings: the optimizer a training run steps, as DDP, ZeRO-1 and FSDP take it (one option,
one widget, one flag), so that every engine at the same settings steps the same optimizer."""
from __future__ import annotations

from dataclasses import dataclass

from dpviz.engines.ddp.options import DdpOptions
from dpviz.engines.spec import same


@dataclass(frozen=True)
class DpOptions:
    optimizer: str = same(DdpOptions, "optimizer")
    precision: str = same(DdpOptions, "precision")
