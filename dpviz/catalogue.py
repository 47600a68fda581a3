"""The models and input forms a run can use: names, labels, data layout and facts, and how each model is split,
without torch.

    MODEL_SPECS["gru_dim1"].dim          # 1: DataParallel splits this model's batch on dim 1
    row_shape("transformer", 5)          # (6,): six token ids, each below 5, per row
    row_shape("cnn", 5)                  # (1, 5, 5): one image per row
    MODEL_SPECS["mlp"].pipeline.layers   # ('net.0', 'net.1', 'net.2', 'net.3'): what a pipeline's stages take
    MODEL_SPECS["transformer"].tensor    # its tensor-parallel plan: each Linear column-wise, row-wise or whole
    INPUT_SPECS["list"].positional       # ("x", "row_ids"): how its positional arguments are named

The one registry both sides read: the config takes its choices and size limit from it, the page and the
command line their labels, the recorder the class that builds each model (dpviz.engines.workload.models) and the facts
to record, every reader of a trace its labels, and every engine what it must know of a model to split it (its
layers, its tensor-parallel plan, its sizes at real scale: dpviz.splitting), so that no engine names a model.
Adding a model or an input form is one entry here and its class in dpviz.engines.workload.models or
dpviz.engines.workload.input_forms; tests/test_declarations.py holds each entry to the model built.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from dpviz.splitting import Cuts, RealSize, TensorPlan

SEQUENCE_LENGTH = 6  # steps per row of the sequence models
BLOCKS = 3  # the transformer's blocks as the catalogue builds it (dpviz.engines.workload.models.Transformer)
HEADS = 8  # its attention heads: whole heads for each of 2, 4 or 8 tensor-parallel ranks
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
    norm: str = ""  # its batch norm ("BatchNorm1d", "BatchNorm2d"): what a chunk of one row does to it in training
    pipeline: Cuts = Cuts(why_not="is no sequence of layers")  # its layers for a pipeline's stages, or why none
    tensor: TensorPlan = TensorPlan(why_not="declares no tensor-parallel plan")  # which Linear is cut how, or why none
    sizes: dict[str, RealSize] = field(default_factory=dict)  # its real scales for a plan, by name ("7b")

    @property
    def returns_loss(self) -> bool:
        """Its forward returns its own 0-dim loss, which DataParallel gathers into a vector."""
        return self.facts == "losses"

    @property
    def recurrent(self) -> bool:
        """Takes a hidden state (the `hidden` input form)."""
        return self.layout == "sequence"

    def row_shape(self, input_size: int) -> tuple[int, ...]:
        """The shape of one row of its data: input_size features, a 1 x input_size x input_size image, or
        SEQUENCE_LENGTH steps of input_size features (or token ids); () for a user's example, indexed by row."""
        return {"own": (), "image": (1, input_size, input_size), "sequence": (SEQUENCE_LENGTH, input_size),
                "tokens": (SEQUENCE_LENGTH,)}.get(self.layout, (input_size,))

    def row_text(self, input_size: int) -> str:
        """One row of its data in words: '5 features', 'a 1 x 5 x 5 image', '6 steps of 5 features'."""
        return {"own": "a row of your example batch", "image": f"a 1 x {input_size} x {input_size} image",
                "sequence": f"{SEQUENCE_LENGTH} steps of {input_size} features",
                "tokens": f"{SEQUENCE_LENGTH} token ids below {input_size}"}.get(self.layout, f"{input_size} features")

    def real_row_text(self, size: str) -> str:
        """One row of its example batch at real size `size`, in words: 'one sequence of 1,024 tokens'."""
        row = self.sizes[size].row
        if self.layout == "tokens":
            return f"one sequence of {row[0]:,} tokens"
        return f"one row of {' x '.join(f'{n:,}' for n in row)} numbers"


# Why the models built on one nn.Linear have no tensor-parallel plan: a plan pairs a column-wise Linear with a
# row-wise one after it, so that what passes between them stays split; one Linear alone would hand its caller a split
# output (column-wise) or need a split input (row-wise).
_ONE_LINEAR = "is one nn.Linear, and a tensor-parallel plan pairs a column-wise Linear with a row-wise one after it"
_GRU = Cuts(why_not="is one GRU, whose steps run inside the layer")
_GRU_PLAN = TensorPlan(why_not="is a GRU, which torch has no tensor-parallel style for, and one nn.Linear on its steps")

# The transformer at real sizes (built on the meta device: nothing is allocated): vocabulary (in and out), context,
# width, heads and blocks of GPT-2 small, and of decoders of about 1 and 7 billion parameters; each row of the
# example batch is one sequence of 1,024 tokens (the context may be longer).
_REAL = {
    "gpt2-small": RealSize("GPT-2 small", 50257, 50257, {"sequence": 1024, "width": 768, "heads": 12, "blocks": 12},
                           row=(1024,)),
    "1b": RealSize("about 1B parameters", 50257, 50257, {"sequence": 2048, "width": 2048, "heads": 16, "blocks": 18},
                   row=(1024,)),
    "7b": RealSize("about 7B parameters", 32000, 32000, {"sequence": 4096, "width": 4096, "heads": 32, "blocks": 32},
                   row=(1024,)),
}

MODEL_SPECS: dict[str, ModelSpec] = {
    "linear": ModelSpec("Linear (the tutorial's)", "Linear", pipeline=Cuts(why_not="is one nn.Linear, a single layer"),
                        tensor=TensorPlan(why_not=_ONE_LINEAR)),
    # Its BatchNorm1d sits on the hidden features a column-wise cut of the first Linear spreads over the ranks, and
    # torch has no tensor-parallel style that splits a BatchNorm's weights and running statistics with them.
    "mlp": ModelSpec("MLP with BatchNorm1d", "MLP", norm="BatchNorm1d",
                     pipeline=Cuts(("net.0", "net.1", "net.2", "net.3")),
                     tensor=TensorPlan(why_not="has a BatchNorm1d between its Linears, whose weights and running "
                                               "statistics cover the hidden features a column-wise cut spreads over the "
                                               "ranks, and torch has no tensor-parallel style that splits them")),
    # Megatron's MLP: its hidden features split over the ranks by a column-wise first Linear, summed back by a
    # row-wise second one, the GELU between running on each rank's own features.
    "ffn": ModelSpec("Feed-forward: Linear, GELU, Linear", "FFN", pipeline=Cuts(("net.0", "net.1", "net.2")),
                     tensor=TensorPlan({"net.0": "colwise", "net.2": "rowwise"})),
    "cnn": ModelSpec("CNN on images, with BatchNorm2d", "CNN", layout="image", norm="BatchNorm2d",
                     pipeline=Cuts(("features.0", "features.1", "features.2", "features.3", "features.4", "features.5",
                                    "features.6", "head")),
                     tensor=TensorPlan(why_not="is convolutions and one nn.Linear head, and torch's tensor-parallel "
                                               "styles cut Linears and Embeddings, not convolutions")),
    "gru": ModelSpec("GRU, batch first (dim=0)", "GRU", layout="sequence", options={"batch_first": True},
                     pipeline=_GRU, tensor=_GRU_PLAN),
    "gru_dim1": ModelSpec("GRU, time first (dim=1)", "GRU", layout="sequence", dim=1, options={"batch_first": False},
                          pipeline=_GRU, tensor=_GRU_PLAN),
    "loss": ModelSpec("Linear that returns its loss", "LossModel", facts="losses",
                      pipeline=Cuts(why_not="returns its loss from forward, which a pipeline's last stage computes "
                                            "itself"),
                      tensor=TensorPlan(why_not=_ONE_LINEAR)),
    "counter": ModelSpec("Linear that counts in forward", "Counter", facts="state",
                         pipeline=Cuts(why_not="changes its own state in forward"), tensor=TensorPlan(why_not=_ONE_LINEAR)),
    "unused": ModelSpec("Linear with a layer forward never uses", "Unused",
                        pipeline=Cuts(why_not="leaves a layer unused, so it is no sequence"),
                        tensor=TensorPlan(why_not="is one nn.Linear beside another that forward never uses, and a "
                                                  "tensor-parallel plan pairs a column-wise Linear with a row-wise one "
                                                  "after it")),
    "transformer": ModelSpec(
        "Transformer blocks on token ids", "Transformer", layout="tokens", inputs=("tensor", "list"),
        # Its first and last layers are groups, not modules: token and position embeddings added, and the norm and
        # head on the last token (the model builds each as one layer: Transformer.pipeline_layer).
        pipeline=Cuts(("embed + position", "blocks.*", "norm + head"), each=BLOCKS),
        tensor=TensorPlan({
            # Each block's MLP, Megatron's pair: up column-wise, down row-wise, so the GELU runs on each rank's own
            # hidden features and one all-reduce sums the down projection's partial outputs.
            "blocks.*.mlp.0": "colwise", "blocks.*.mlp.2": "rowwise",
            # Attention, Megatron's way: q, k and v each cut column-wise (each rank whole heads of all three, heads /
            # ranks of them), its output projection row-wise, one all-reduce summing the heads' partial outputs (g);
            # the three take one input, made one replicated DTensor so that its gradient is summed once (f).
            "blocks.*.attention": "shared_input",
            "blocks.*.attention.wq": "colwise", "blocks.*.attention.wk": "colwise", "blocks.*.attention.wv": "colwise",
            "blocks.*.attention.out": "rowwise",
            "head": "whole",  # the output on the last token, whole on every rank: the loss reads all of it
        }, heads=HEADS),
        sizes=_REAL),
    # A module of the user's own (python -m dpviz --model file.py:build, or dpviz.record(module, batch)): its
    # trace names its class and parameter counts in facts["model"] (dpviz.trace.own_model), never its code. How it is
    # split it declares itself (dpviz.engines.workload.declared).
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
    """The shape of one row of data for `model` (ModelSpec.row_shape)."""
    return MODEL_SPECS[model].row_shape(input_size)


def row_elements(model: str, input_size: int) -> int:
    """Numbers in one row of data for `model`: what the dataset-size limit counts."""
    return math.prod(row_shape(model, input_size))


def row_text(model: str, input_size: int) -> str:
    """One row of `model`'s data in words (ModelSpec.row_text)."""
    return MODEL_SPECS[model].row_text(input_size)


def cut_models() -> dict[str, ModelSpec]:
    """The listed models a pipeline can cut, by name, in the catalogue's order."""
    return {name: spec for name, spec in MODEL_SPECS.items() if spec.listed and spec.pipeline.layers}


def sized_models() -> dict[str, ModelSpec]:
    """The listed models declared at real sizes, by name."""
    return {name: spec for name, spec in MODEL_SPECS.items() if spec.listed and spec.sizes}
