"""ZeRO-1's words: DDP's phases and memory kinds, with a step that updates only the rank's own shard of
the parameters and then broadcasts every shard from its owner."""
from __future__ import annotations

import dataclasses

from dpviz.engines.ddp.vocabulary import VOCABULARY as DDP


def _phase(phase):
    if phase.name != "step":
        return phase
    return dataclasses.replace(phase, label="ZeRO step",
                               hover="ZeRO step: the rank updates the parameters it owns (its shard of the optimizer "
                                     "state), then each shard is broadcast from its owner")


VOCABULARY = dataclasses.replace(
    DDP, engine="zero1", title="ZeRO-1", phases=tuple(map(_phase, DDP.phases)),
    # The timeline's mark where each ZeRO step ends: the broadcasts run inside the step, timed with it, not apart.
    words={**DDP.words, "step_broadcast": "broadcast: the updated shards sent from their owners",
           # One step's title: what a rank holds besides its rows, the lesson (DDP's says only its rows)
           "one_step_holds": "the optimizer's state of only the parameters it owns"},
)
