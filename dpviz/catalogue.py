"""The models and input forms a run can use: names, labels, data layout and facts, without torch.

    MODEL_SPECS["gru_dim1"].dim          # 1: DataParallel splits this model's batch on dim 1
    row_shape("transformer", 5)          # (6,): six token ids, each below 5, per row
    row_shape("cnn", 5)                  # (1, 5, 5): one image per row
    INPUT_SPECS["list"].positional       # ("x", "row_ids"): how its positional arguments are named

The one registry both sides read: the config takes its choices and size limit from it, the page and the
command line their labels, the recorder the class that builds each model (dpviz.engines.workload.models) and the facts
to record, and every reader of a trace its labels. Adding a model or an input form is one entry here
and its class in dpviz.engines.workload.models or dpviz.engines.workload.input_forms.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

SEQUENCE_LENGTH = 6  # steps per row of the sequence models
OWN = "own"  # the model and input form of a run of the user's own module, with its own example batch


@dataclass(frozen=True)
class ModelSpec:
    """A model: what the page calls it, how one row of its data is laid out, and what it shows."""

    label: str
    builder: str  # the class in dpviz.engines.workload.models, called as builder(input_size, output_size, **options)
    # "features" (input_size), "image" (1 x s x s), "sequence" (steps x input_size) or "tokens" (steps token ids,
    # each below input_size: the vocabulary)
    layout: str = "features"
    dim: int = 0  # the dim of its input that holds the batch: DataParallel's `dim`
    options: dict[str, Any] = field(default_factory=dict)
    facts: str | None = None  # what a run records about it: "state" (counters) or "losses" (its own loss)
    listed: bool = True  # offered by the page, links and --model's names; False: recorded from the user's module only
    inputs: tuple[str, ...] = ()  # the input forms it takes, when not all: token ids cannot be scaled by a weight

    @property
    def returns_loss(self) -> bool:
        """Its forward returns its own 0-dim loss, which DataParallel gathers into a vector."""
        return self.facts == "losses"

    @property
    def recurrent(self) -> bool:
        """Takes a hidden state (the `hidden` input form)."""
        return self.layout == "sequence"


MODEL_SPECS: dict[str, ModelSpec] = {
    "linear": ModelSpec("Linear (the tutorial's)", "Linear"),
    "mlp": ModelSpec("MLP with BatchNorm1d", "MLP"),
    "cnn": ModelSpec("CNN on images, with BatchNorm2d", "CNN", layout="image"),
    "gru": ModelSpec("GRU, batch first (dim=0)", "GRU", layout="sequence", options={"batch_first": True}),
    "gru_dim1": ModelSpec("GRU, time first (dim=1)", "GRU", layout="sequence", dim=1, options={"batch_first": False}),
    "loss": ModelSpec("Linear that returns its loss", "LossModel", facts="losses"),
    "counter": ModelSpec("Linear that counts in forward", "Counter", facts="state"),
    "unused": ModelSpec("Linear with a layer forward never uses", "Unused"),
    "transformer": ModelSpec("Transformer blocks on token ids", "Transformer", layout="tokens",
                             inputs=("tensor", "list")),
    # A module of the user's own (python -m dpviz --model file.py:build, or dpviz.record(module, batch)): its
    # trace names its class and parameter counts in facts["model"] (dpviz.trace.own_model), never its code.
    OWN: ModelSpec("your own model", "", layout="own", listed=False),
}


@dataclass(frozen=True)
class InputSpec:
    """An input form: what the page calls it and the names of its forward's positional arguments."""

    label: str
    positional: tuple[str, ...]
    recurrent_only: bool = False  # passes a hidden state, so only models that take one
    dataparallel_only: str = ""  # the DataParallel pitfall it exists to show; DDP refuses it
    listed: bool = True  # offered by the page, links and --inputs; False: the user's own example batch only


INPUT_SPECS: dict[str, InputSpec] = {
    "tensor": InputSpec("model(x), as the tutorial", ("x",)),
    "tuple": InputSpec("model((x, weight)): a tuple", ("batch",)),
    "dict": InputSpec("model({'x': x, 'weight': w})", ("batch",)),
    "kwargs": InputSpec("model(x, scale=0.5): a keyword", ("x",),
                        dataparallel_only="a keyword makes replicas with no input when a batch has fewer rows than devices"),
    "list": InputSpec("model(x, row_ids): a Python list", ("x", "row_ids"),
                      dataparallel_only="scatter hands every replica the whole list"),
    "hidden": InputSpec("model(x, h0): a GRU's hidden state", ("x", "h0"), recurrent_only=True),
    OWN: InputSpec("your own example batch", ("batch",), listed=False),
}


def row_shape(model: str, input_size: int) -> tuple[int, ...]:
    """The shape of one row of data for `model`: input_size features, a 1 x input_size x input_size
    image or SEQUENCE_LENGTH steps of input_size features."""
    layout = MODEL_SPECS[model].layout
    if layout == "own":  # the example's rows, indexed: the dataset holds one row number per row
        return ()
    if layout == "image":
        return (1, input_size, input_size)
    if layout == "sequence":
        return (SEQUENCE_LENGTH, input_size)
    if layout == "tokens":
        return (SEQUENCE_LENGTH,)
    return (input_size,)


def row_elements(model: str, input_size: int) -> int:
    """Numbers in one row of data for `model`: what the dataset-size limit counts."""
    return math.prod(row_shape(model, input_size))


def row_text(model: str, input_size: int) -> str:
    """One row of `model`'s data in words: '5 features', 'a 1 x 5 x 5 image', '6 steps of 5 features'."""
    layout = MODEL_SPECS[model].layout
    if layout == "own":
        return "a row of your example batch"
    if layout == "image":
        return f"a 1 x {input_size} x {input_size} image"
    if layout == "sequence":
        return f"{SEQUENCE_LENGTH} steps of {input_size} features"
    if layout == "tokens":
        return f"{SEQUENCE_LENGTH} token ids below {input_size}"
    return f"{input_size} features"
