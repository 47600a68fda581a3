"""What a trace of the user's own module says about it, without torch: its class, its parameter counts and
the layout of its example batch as DataParallel's scatter meets it.

    fact = read_model(trace.facts["model"])   # {"class": "TinyLM", "parameters": 10_530, ...}, checked
    leaves_of(fact)                            # the positional and keyword leaves dpviz.engines.dp.split_rules counts

A leaf is ROWS (a tensor with one entry per row along the batch dim: it is split, and follows the batch),
a whole number (a tensor of that length along the batch dim whatever the batch: split all the same) or
None (an object scatter hands every device whole). Nothing of the module's code is kept: a hosted page
that loads such a trace runs nothing of it.
"""
from __future__ import annotations

from typing import Any

from dpviz.trace.values import MAX_ROWS, TraceError, mapping, sequence, shown, text_of, whole

ROWS = "rows"
MAX_LEAVES = 64  # tensors and other objects in one batch: what a replica's arguments may hold
MAX_PARAMETERS = 10**13  # parameter count of a module: past any model that fits a machine
KEYS = ("class", "keywords", "parameters", "positional", "rows", "trainable")


class Args:
    """Several arguments for one call of the model: `Args(x, h0, scale=0.5)` makes model(x, h0, scale=0.5).
    A batch that is anything else (a tensor, a tuple, a dict, ...) is passed as model(batch)."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.args, self.kwargs = args, kwargs

    def __repr__(self) -> str:
        return f"Args({len(self.args)} positional, {len(self.kwargs)} keyword)"


def read_model(value: Any) -> dict[str, Any]:
    """facts["model"] of a loaded trace, every value checked; TraceError (one sentence) otherwise."""
    fact = mapping(value, "facts model")
    if sorted(map(str, fact)) != sorted(KEYS):
        raise TraceError(f"facts model should hold {', '.join(KEYS)}, got {shown(sorted(map(str, fact)))}.")
    name = text_of(fact["class"], "the model's class", 100)
    if not name.isidentifier():
        raise TraceError(f"the model's class should be a Python class name, got {shown(name)}.")
    parameters = whole(fact["parameters"], "the model's parameters", 0, MAX_PARAMETERS)
    return {
        "class": name,
        "parameters": parameters,
        "trainable": whole(fact["trainable"], "the model's trainable parameters", 0, parameters),
        "rows": whole(fact["rows"], "the example batch's rows", 1, MAX_ROWS),
        "positional": _leaves(fact["positional"], "positional"),
        "keywords": _leaves(fact["keywords"], "keyword"),
    }


def _leaves(value: Any, where: str) -> list:
    leaves = sequence(value, f"the model's {where} leaves", MAX_LEAVES)
    for leaf in leaves:
        if not (leaf is None or leaf == ROWS or (isinstance(leaf, int) and not isinstance(leaf, bool)
                                                 and 0 <= leaf <= MAX_ROWS)):
            raise TraceError(f"a {where} leaf of the model's batch should be {ROWS!r}, a row count or null, "
                             f"got {shown(leaf)}.")
    return list(leaves)


def check_own(model: str, facts: dict[str, Any]) -> None:
    """A trace of the user's own module names it in facts["model"], and only such a trace does."""
    from dpviz.catalogue import OWN

    if (model == OWN) != ("model" in facts):
        raise TraceError(f"a trace of model {OWN!r} names its module in facts model, and only such a trace does; "
                         f"this one has model {shown(model)} {'with' if 'model' in facts else 'without'} it.")


def leaves_of(fact: dict[str, Any], rows: int) -> tuple[tuple, tuple]:
    """The positional and keyword leaves of a `rows`-row batch, as dpviz.engines.dp.split_rules counts them."""
    at = lambda leaf: rows if leaf == ROWS else leaf
    return tuple(at(leaf) for leaf in fact["positional"]), tuple(at(leaf) for leaf in fact["keywords"])


def described(fact: dict[str, Any]) -> str:
    """The module in words: 'TinyLM (10,530 parameters, 10,002 trainable)'."""
    frozen = fact["parameters"] - fact["trainable"]
    count = f"{fact['parameters']:,} parameter{'s' if fact['parameters'] != 1 else ''}"
    return f"{fact['class']} ({count}{f', {frozen:,} frozen' if frozen else ''})"
