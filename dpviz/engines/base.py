"""The one seam between dpviz and whatever spreads a batch over lanes: an `Engine`.

An engine names its vocabulary (lanes, phases, memory kinds), resolves the kind of device a
configuration runs on, records a run into a `Trace`, and checks that a loaded trace of its kind is
consistent. Everything that shows a trace reads only the trace, so a new engine needs no new view.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

from dpviz.config import RunConfig
from dpviz.trace import Trace
from dpviz.trace.vocabulary import Vocabulary

Progress = Callable[[int, int], None]  # (batches done, batches in all)


class Engine(Protocol):
    """What every engine provides."""

    name: str
    vocabulary: Vocabulary

    def resolve(self, config: RunConfig, available: int | None = None) -> RunConfig:
        """`config` with its device kind settled ("cuda" or "simulated"); ConfigError if it can't run here."""

    def record(self, config: RunConfig, progress: Progress | None = None, workload: Any = None) -> Trace:
        """Run `config` and return what happened; `workload` (dpviz.engines.workload.own.OwnWorkload): the
        user's own built module and batch, run instead of the catalogue's model."""

    def check(self, trace: Trace) -> None:
        """Raise ValueError (one sentence) unless a loaded trace is what this engine could have recorded."""
