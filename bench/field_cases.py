"""Uploads one field off: a real trace of every engine with one field changed, removed or retyped.

    for engine, case, text in field_cases(seed, per_engine): ...

Where bench/fuzz_uploads.py mutates at random (and mostly DataParallel's traces), these cases walk the fields of
a small real run of each engine (DataParallel, DDP, ZeRO-1, FSDP, a pipeline; a failing run among them) and
change each once: a neighbouring value, the field gone, or the same value as another JSON type. A list's first,
second and last items stand for the rest, so a trace of thousands of spans gives a few hundred fields.
"""
from __future__ import annotations

import copy
import json
import random
from functools import lru_cache
from typing import Any, Iterator

from dpviz import RunConfig
from dpviz.engines.run import record
from dpviz.presets import ALL_PRESETS
from dpviz.trace import json_io as trace_json

# Small real runs, each engine's: a training run, and a failing one where the engine has a preset that fails.
RUNS: dict[str, list[RunConfig]] = {
    "dp": [RunConfig(gpus=3, train=True, data_size=50, batch_size=20),
           ALL_PRESETS["kwargs-small-batch"].config, ALL_PRESETS["batchnorm-one-row"].config],
    "ddp": [RunConfig(engine="ddp", gpus=2, train=True, model="mlp", data_size=40, batch_size=20, bucket_cap_mb=0.0002),
            ALL_PRESETS["ddp-unused-parameter"].config],
    "zero1": [RunConfig(engine="zero1", gpus=2, train=True, model="mlp", optimizer="adam", data_size=40, batch_size=20)],
    "fsdp": [RunConfig(engine="fsdp", gpus=2, train=True, model="mlp", data_size=40, batch_size=20)],
    "pipeline": [RunConfig(engine="pipeline", gpus=2, train=True, model="mlp", data_size=32, batch_size=16,
                           microbatches=2)],
}
EDITS = ("changed", "removed", "retyped")


@lru_cache(maxsize=None)
def documents(engine: str) -> tuple[str, ...]:
    """The engine's runs as trace files (simulated devices where the engine has a choice)."""
    return tuple(trace_json.dumps(record(config)) for config in RUNS[engine])


def fields(value: Any, path: tuple = ()) -> Iterator[tuple]:
    """Every field's path in `value`; of a list, its first, second and last items only."""
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        items = [(i, value[i]) for i in sorted({0, 1, len(value) - 1}) if 0 <= i < len(value)]
    else:
        return
    for key, item in items:
        yield path + (key,)
        yield from fields(item, path + (key,))


def _changed(value: Any, rng: random.Random) -> Any:
    """A value of the same type next to `value`: what an off-by-one or a hand edit writes."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return rng.choice([value + 1, value - 1, -value, value * 2])
    if isinstance(value, float):
        return rng.choice([value * 2, -value, value + 1.0, 0.0])
    if isinstance(value, str):
        return rng.choice([value + "x", value[:-1], value.upper()])
    if isinstance(value, list):
        return rng.choice([value[:-1], value + value[-1:], list(reversed(value))])
    if isinstance(value, dict):
        return {**value, "extra": 1}
    return rng.choice([0, "", []])  # null: a value where there was none


def _retyped(value: Any) -> Any:
    """The same value as another JSON type: a number as text, text as a number, a list as an object, and so on."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return 1 if not value.strip().lstrip("-").isdigit() else int(value)
    if isinstance(value, list):
        return {str(i): item for i, item in enumerate(value)}
    if isinstance(value, dict):
        return list(value.values())
    return {}


def edit(doc: Any, path: tuple, how: str, rng: random.Random) -> str:
    """Apply one edit to `doc` in place at `path`; say what it did."""
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    if how == "removed":
        del parent[key]
        return f"del {path}"
    parent[key] = _changed(parent[key], rng) if how == "changed" else _retyped(parent[key])
    shown = repr(parent[key])
    return f"{path} {'~' if how == 'changed' else '='} {shown if len(shown) <= 40 else shown[:40] + '…'}"


def field_cases(seed: int, per_engine: int) -> Iterator[tuple[str, str, str]]:
    """Up to `per_engine` cases of each engine, drawn without repeats from every (run, field, edit): the engine, what
    was edited, and the file's text."""
    for engine in RUNS:
        rng = random.Random(f"fields-{seed}-{engine}")
        texts = documents(engine)
        every = [(n, path, how) for n, text in enumerate(texts) for path in fields(json.loads(text)) for how in EDITS]
        for n, path, how in rng.sample(every, min(per_engine, len(every))):
            doc = copy.deepcopy(json.loads(texts[n]))
            said = edit(doc, path, how, rng)
            yield engine, f"{engine} run {n + 1}: {said}", json.dumps(doc)
