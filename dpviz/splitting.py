"""How a model says it is split, as plain data (no torch): its layers for a pipeline's cuts, its tensor-parallel
plan and its sizes at real scale. A catalogue model declares them in dpviz.catalogue.ModelSpec; a user's module by
optional attributes (dpviz.engines.workload.declared reads both). torchtitan's TrainSpec plays this part there.

    Cuts(("net.0", "net.1", "net.2", "net.3"))               # a pipeline's stages take runs of these layers
    Cuts(why_not="is one nn.Linear, a single layer")          # a model that cannot be cut, and why (a clause)
    TensorPlan({"blocks.*.mlp.0": "colwise", "blocks.*.mlp.2": "rowwise"})
    matches("blocks.*.mlp.0", "blocks.2.mlp.0")               # True: a wildcard stands for one name, per block

A module path may hold a wildcard in any of its dot-separated names, matched as torch's parallelize_module matches
its plan's keys (fnmatch, name by name), so one entry says what every block does. A layer named "a + b" is a group:
modules the model runs as one layer (its `pipeline_layer(name)` builds it), such as an embedding beside another.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatch
from typing import Any

STYLES = ("colwise", "rowwise", "whole", "shared_input")
# colwise, rowwise: torch's ColwiseParallel and RowwiseParallel on an nn.Linear; whole: left entire on every rank;
# shared_input: torch's PrepareModuleInput on a module whose column-wise Linears share one input (attention's wq, wk
# and wv), making that input one replicated DTensor, so the ranks sum its gradient once (Megatron's f), not once per
# Linear.
SHARED = "shared_input"
GROUP = " + "  # joins the modules of one layer that is no module of its own


@dataclass(frozen=True)
class Cuts:
    """A model's layers for a pipeline's cuts, in the order forward runs them (each takes the one tensor the last
    gave), or why it cannot be cut."""

    layers: tuple[str, ...] = ()  # module paths, wildcards allowed, or groups "a + b"; () when it cannot be cut
    why_not: str = ""  # a clause after the model's name: "is one nn.Linear, a single layer"
    # How many layers each wildcard entry stands for in the catalogue's own build (tests hold it to the built model):
    # what lets a config be judged without torch. A model built at a real size counts its own.
    each: int = 1

    @property
    def count(self) -> int:
        """The layers of the model as the catalogue builds it."""
        return sum(self.each if "*" in layer else 1 for layer in self.layers)


@dataclass(frozen=True)
class TensorPlan:
    """A model's tensor-parallel plan, as torch's parallelize_module takes one: module path (wildcards allowed) to
    "colwise" (output features split over the ranks), "rowwise" (input features split, the outputs summed) or
    "whole" (kept entire on every rank), every nn.Linear named once; and "shared_input" on a module whose column-wise
    Linears take one input. Empty with `why_not` when no plan is sound."""

    styles: dict[str, str] = field(default_factory=dict)
    why_not: str = ""  # a clause after the model's name: "has a BatchNorm1d between its Linears, ..."
    heads: int = 0  # the attention heads its column-wise q, k and v hold, as the catalogue builds it: each rank takes
    # whole heads, so the ranks must divide them (0: no heads)

    def cut(self) -> dict[str, str]:
        """The entries torch is asked to parallelize (those left whole are torch's default: nothing to ask)."""
        return {path: style for path, style in self.styles.items() if style != "whole"}


@dataclass(frozen=True)
class RealSize:
    """A catalogue model at a real scale, built on the meta device for a plan: its builder's sizes and one row."""

    label: str  # "about 7B parameters"
    input_size: int  # the builder's first two arguments (a transformer's vocabulary, in and out)
    output_size: int
    options: dict[str, Any] = field(default_factory=dict)  # the builder's keywords: width, heads, blocks, ...
    row: tuple[int, ...] = ()  # one row of its example batch (a sequence of 1,024 tokens: (1024,))


def matches(pattern: str, path: str) -> bool:
    """Whether module `path` is one `pattern` names: the same count of names, each matched by fnmatch."""
    want, have = pattern.split("."), path.split(".")
    return len(want) == len(have) and all(fnmatch(name, token) for name, token in zip(have, want))


def expand(patterns: tuple[str, ...] | list[str], paths: list[str]) -> list[str]:
    """`patterns` with each wildcard entry replaced by the `paths` it names, in their order; a group or a plain path
    stays as it is (whether it exists is the reader's to check)."""
    found: list[str] = []
    for pattern in patterns:
        found += [p for p in paths if matches(pattern, p)] if "*" in pattern and GROUP not in pattern else [pattern]
    return found
