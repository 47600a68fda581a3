"""The engines dpviz can run, by the name a config, a link and the command line use: the one table that
everything outside an engine's package looks an engine up in.

    ENGINES["ddp"].label               # 'DistributedDataParallel': what differs is declared in its spec
    ENGINES["ddp"].part("summary")     # one of its parts (a reader, its check, its options' rules)
    vocabulary("dp")                   # DataParallel's phases and memory kinds: no torch, for readers
    engine("dp").record(cfg)           # the recording side, imported only when a run is asked for

Adding an engine is one entry here and its package beside dp/: a spec.py (dpviz.engines.spec.EngineSpec),
a vocabulary.py, an engine.py with `resolve`, `record` and `check`, and the readers its spec names.
"""
from __future__ import annotations

from typing import Any

from dpviz.engines.ddp.spec import SPEC as _DDP
from dpviz.engines.dp.spec import SPEC as _DP
from dpviz.engines.fsdp.spec import SPEC as _FSDP
from dpviz.engines.pipeline.spec import SPEC as _PIPELINE
from dpviz.engines.spec import EngineSpec, Option
from dpviz.engines.tp.spec import SPEC as _TP
from dpviz.engines.zero1.spec import SPEC as _ZERO1

ENGINES: dict[str, EngineSpec] = {spec.name: spec for spec in (_DP, _DDP, _ZERO1, _FSDP, _PIPELINE, _TP)}  # the first: traces before schema 3
FIRST = next(iter(ENGINES))  # what recorded a trace that names no engine (schema 1 and 2)


def spec(name: str) -> EngineSpec:
    """Engine `name`'s spec; ValueError (one sentence) for a name no engine has."""
    if name not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {name!r}")
    return ENGINES[name]


def vocabulary(name: str) -> Any:
    """The vocabulary of engine `name` (dpviz.trace.vocabulary.Vocabulary): what its traces are drawn and explained with."""
    return spec(name).part("vocabulary")


def engine(name: str) -> Any:
    """Engine `name` itself (dpviz.engines.base.Engine), importing its recording side (torch) now."""
    return spec(name).part("engine")


def options() -> dict[str, object]:
    """Every engine's own options at their unset values: what a config of another engine holds for them."""
    return {name: value for each in ENGINES.values() for name, value in each.unset.items()}


def declared() -> dict[str, Option]:
    """Every engine's own options by name, as declared (one that two engines share is one option)."""
    return {option.name: option for each in ENGINES.values() for option in each.options}


def owners(name: str) -> list[EngineSpec]:
    """The engines that read option `name` (several may share one: DDP's bucket cap); none for a common setting."""
    return [each for each in ENGINES.values() if name in each.unset]


def needs(name: str, flag: str | None = None) -> str:
    """Why option `name` was refused for another engine: "bucket_cap_mb is a DistributedDataParallel option,
    so it needs engine ddp" (`flag`: the command line's word for it, and --engine)."""
    readers = owners(name)
    what = f"a {readers[0].label} option" if len(readers) == 1 else \
        f"an option of {', '.join(e.label for e in readers[:-1])} and {readers[-1].label}"
    engine = "--engine" if flag else "engine"
    return f"{flag or name} is {what}, so it needs {' or '.join(f'{engine} {e.name}' for e in readers)}"
