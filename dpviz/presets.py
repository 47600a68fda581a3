"""Pitfall presets: one configuration each for a way DataParallel surprises people, ready to run.

    PRESETS["kwargs-small-batch"].config      # the RunConfig that shows it
    preset_of(config)                         # the preset a configuration is, if any

Each is the tutorial's defaults changed only where the pitfall needs it, so a run shows the pitfall
and nothing else. What happened is explained from the run itself (dpviz.explain_pitfalls), never
from the preset's text: the text only says what to look for.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .config import RunConfig


@dataclass(frozen=True)
class Preset:
    """A named configuration and what to look for when it runs."""

    name: str
    title: str
    look_for: str
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def config(self) -> RunConfig:
        return RunConfig(**{**RunConfig().to_dict(), "backend": "auto", **self.settings})


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("idle-gpus", "Idle GPUs on a short last batch",
           "100 rows in batches of 30 leave a last batch of 10; on 8 GPUs torch.chunk makes 5 chunks of 2, "
           "so GPUs 5-7 get nothing and DataParallel says nothing. See Split per batch and Flow.",
           {"gpus": 8}),
    Preset("batchnorm-one-row", "A 1-row chunk reaches BatchNorm",
           "95 rows in batches of 30 end with a batch of 5; on 4 GPUs it splits 2, 2, 1, and BatchNorm1d in "
           "training mode cannot normalise a single row: the last batch fails.",
           {"model": "mlp", "train": True, "gpus": 4, "data_size": 95}),
    Preset("kwargs-small-batch", "A keyword argument with a batch smaller than the GPUs",
           "model(x, scale=0.5) on 8 GPUs: the keyword is copied to all 8, but the last batch's 10 rows make "
           "only 5 chunks of x, so replicas 5-7 are called with no x at all.",
           {"inputs": "kwargs", "gpus": 8}),
    Preset("scalar-loss", "forward returns a scalar loss",
           "Each replica returns a 0-dim loss; gather warns and returns one loss per GPU. Averaging that "
           "vector weighs a 2-row chunk like a 4-row one.",
           {"model": "loss", "gpus": 3}),
    Preset("rnn-hidden-dim", "A GRU's hidden state split on the wrong dimension",
           "h0 is (layers, batch, hidden): its batch is on dim 1, but DataParallel splits every tensor on "
           "dim 0, so h0 is cut along its layers: one piece, one replica, and a hidden-size error.",
           {"model": "gru", "inputs": "hidden", "gpus": 2}),
    Preset("state-lost", "State changed in forward is lost",
           "The model counts calls in self.calls and rows in a buffer. Replicas are shallow copies made "
           "anew for every batch: the Python counter never moves and the buffer counts replica 0's rows only.",
           {"model": "counter", "gpus": 2}),
)}


def preset_of(config: RunConfig) -> Preset | None:
    """The preset whose configuration `config` is (any backend), or None."""
    for preset in PRESETS.values():
        if dataclasses.replace(preset.config, backend=config.backend) == config:
            return preset
    return None
