"""Whether an engine's parts are what dpviz calls them as: each loads, and each binds the arguments of the Protocol
its field of dpviz.engines.parts.Parts names; the vocabulary is a Vocabulary, the engine an Engine, the rank
program a RankProgram. Loading every part imports the engine's recording side (torch): the tests ask, a page never.

    problems(ENGINES["ddp"].parts)     # [] when every part follows its Protocol, else one line per part that does not
"""
from __future__ import annotations

import inspect
from typing import Any

from dpviz.engines.base import Engine
from dpviz.engines.parts import Parts
from dpviz.trace.vocabulary import Vocabulary


def _arguments(protocol: type) -> tuple[list[str], list[str]]:
    """The positional and keyword-only arguments dpviz passes to a part of this Protocol."""
    parameters = list(inspect.signature(protocol.__call__).parameters.values())[1:]  # without self
    positional = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    keywords = [p.name for p in parameters if p.kind is p.KEYWORD_ONLY]
    return positional, keywords


def problems(parts: Parts) -> list[str]:
    """Every part that cannot be loaded, or cannot be called as its Protocol says: [] when all can."""
    found = []
    for name, reference, protocol in parts.named():
        try:
            value = reference.load()
        except Exception as error:  # noqa: BLE001 (reported: that is the point)
            found.append(f"{name}: {reference.where} cannot be loaded ({type(error).__name__}: {error})")
            continue
        if name == "vocabulary":
            if not isinstance(value, Vocabulary):
                found.append(f"vocabulary: {reference.where} is a {type(value).__name__}, not a Vocabulary")
            continue
        if name == "rank_program":
            from dpviz.engines.ranks.program import RankProgram

            if not isinstance(value, RankProgram):
                found.append(f"rank_program: {reference.where} is a {type(value).__name__}, not a RankProgram")
            continue
        if name == "engine":
            found += [f"engine: {reference.where}.{problem}" for problem in _engine_problems(value)]
            continue
        if protocol is None:
            continue
        positional, keywords = _arguments(protocol)
        try:
            inspect.signature(value).bind(*positional, **{k: None for k in keywords})
        except TypeError as error:
            found.append(f"{name}: {reference.where}{inspect.signature(value)} cannot be called as "
                         f"({', '.join(positional + [f'{k}=' for k in keywords])}): {error}")
    return found


def _engine_problems(engine: Any) -> list[str]:
    """Where `engine` does not follow dpviz.engines.base.Engine: a method missing, or called otherwise."""
    found = []
    for method in ("resolve", "record", "check"):
        mine = getattr(engine, method, None)
        if mine is None:
            found.append(f"{method} is missing")
            continue
        parameters = list(inspect.signature(getattr(Engine, method)).parameters)[1:]
        try:
            inspect.signature(mine).bind(*parameters)
        except TypeError as error:
            found.append(f"{method}{inspect.signature(mine)} cannot be called as ({', '.join(parameters)}): {error}")
    return found
