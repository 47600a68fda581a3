"""The engines dpviz can run, by the name a config, a link and the command line use.

    vocabulary("dp")           # DataParallel's phases and memory kinds: no torch, for readers
    checker("dp")(trace)       # its rules for a loaded trace: no torch, and not the engine module
    engine("dp").record(cfg)   # the recording side, imported only when a run is asked for

Adding an engine is one entry here and its package beside dp/ (vocabulary.py, check.py and engine.py).
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from ..trace import Trace
    from ..vocabulary import Vocabulary
    from .base import Engine

ENGINES = {"dp": "nn.DataParallel", "ddp": "DistributedDataParallel"}  # name -> what it runs


def vocabulary(name: str) -> "Vocabulary":
    """The vocabulary of engine `name`: what its traces are drawn and explained with."""
    return import_module(f"{__name__}.{_known(name)}.vocabulary").VOCABULARY


def checker(name: str) -> "Callable[[Trace], None]":
    """The check of engine `name`'s traces: raises ValueError (one sentence) unless a loaded trace is what
    the engine could have recorded. Its module (check.py) imports no torch, so loading a trace needs none."""
    return import_module(f"{__name__}.{_known(name)}.check").check_trace


def engine(name: str) -> "Engine":
    """Engine `name` itself, importing its recording side (torch) now."""
    return import_module(f"{__name__}.{_known(name)}.engine").ENGINE


def _known(name: str) -> str:
    if name not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {name!r}")
    return name
