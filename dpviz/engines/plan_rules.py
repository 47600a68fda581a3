"""The rules a plan is made with: a model's shape and the bytes each engine's `plan` part places on its devices
from it, for what `python -m dpviz plan` and `dpviz.plan(...)` print (dpviz.engines.plan; no torch here).

    shape = ModelShape(...)                       # measured once (dpviz.engines.workload.shapes.measure)
    ENGINES["zero1"].part("plan")(shape, 8, "adam")   # [{"parameters": B, "gradients": B, ...}, ...] per device

A model's shape is its parameters (name, shape, bytes per element, whether backward reaches them), its buffers,
its sharded units under dpviz's FSDP wrap policy, and what one row of its example batch costs: the tensors
autograd saves for backward, its input and its output, measured by running forward and backward on the meta
device with saved-tensor hooks. Each engine's rules then place those bytes on its devices, as the live runs'
ranks hold them (tests/test_plan.py holds them against facts["held"] of real runs).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

KINDS = ("parameters", "gradients", "optimizer state", "activations", "sent")
STATE_PER_ELEMENT = {"sgd": 1, "adam": 2}  # SGD's momentum buffer; Adam's two moments (its step counters left out)


@dataclass(frozen=True)
class Param:
    name: str  # every name it goes by, "embed.weight = out.weight" for one shared by several modules
    shape: tuple[int, ...]
    element_size: int
    trainable: bool  # requires grad
    reached: bool  # backward gave it a gradient (a layer forward never uses gets none)

    @property
    def numel(self) -> int:
        return prod(self.shape)

    @property
    def bytes(self) -> int:
        return self.numel * self.element_size

    @property
    def grad_bytes(self) -> int:
        return self.bytes if self.trainable and self.reached else 0


@dataclass(frozen=True)
class Layer:
    """One of the layers an engine cuts a model into (a pipeline's stages take runs of them), over the example batch:
    its parameters, what autograd saved in it, and the tensors it takes and hands on."""

    name: str  # "blocks.0", "embed + position"
    params: tuple[str, ...]  # the names of its parameters (Param.name)
    saved_bytes: int  # saved for backward in this layer, its input's and output's storages left out
    input_bytes: int
    output_bytes: int
    saves_input: bool  # whether backward needs the tensor it takes (a Linear does, a ReLU its output)
    saves_output: bool

    def scaled(self, factor: float) -> "Layer":
        return Layer(self.name, self.params, round(self.saved_bytes * factor), round(self.input_bytes * factor),
                     round(self.output_bytes * factor), self.saves_input, self.saves_output)


@dataclass(frozen=True)
class CutModule:
    """A module a tensor-parallel plan names, as forward ran it over the example batch: what it took and gave."""

    path: str  # "blocks.0.mlp.0"
    style: str  # "colwise", "rowwise" or "shared_input" (dpviz.splitting.STYLES)
    kind: str  # its class: torch's ColwiseParallel and RowwiseParallel cut nn.Linear here
    input_bytes: int
    output_bytes: int
    input_grad: bool  # whether what it took needs a gradient (the data does not; a block's activations do)


@dataclass(frozen=True)
class TensorShape:
    """What a tensor-parallel plan of the model cuts: each cut parameter's style, the modules the plan names, and of
    what autograd saves what lies between a column-wise cut and the row-wise one after it (1/T on each rank)."""

    styles: tuple[tuple[str, str], ...]  # (parameter name, its module's style) for parameters of cut Linears
    modules: tuple[CutModule, ...]
    split_saved: int  # of ModelShape.saved_bytes, the bytes each rank holds 1/T of
    heads: int = 0  # attention heads its column-wise q, k and v hold: each rank takes whole heads (0: none)

    def scaled(self, factor: float) -> "TensorShape":
        import dataclasses

        return dataclasses.replace(self, split_saved=round(self.split_saved * factor), modules=tuple(
            dataclasses.replace(m, input_bytes=round(m.input_bytes * factor), output_bytes=round(m.output_bytes * factor))
            for m in self.modules))


@dataclass(frozen=True)
class ModelShape:
    """What the plan needs of a model, measured once (plain data)."""

    name: str  # the model's class
    params: tuple[Param, ...]
    buffer_bytes: int
    units: tuple[tuple[str, tuple[str, ...]], ...]  # FSDP: (module, its parameters' names) sharded before the root
    rows: int  # rows of the example batch the activations were measured on
    saved_bytes: int  # tensors autograd saved for backward over the example batch
    input_bytes: int  # the example batch itself
    output_bytes: int  # the model's output for it
    dtype: str = "float32"
    notes: tuple[str, ...] = field(default=())
    catalogue: str | None = None  # the catalogue's name for the model ("transformer"); None for a module of one's own
    layers: tuple[Layer, ...] = ()  # as an engine cuts the model into a sequence (Parts.plan_layers)
    uncut: str | None = None  # why that engine cannot cut it (its sentence), when it cannot
    precision: str = "full"  # "mixed": bfloat16 compute over these float32 parameters, measured under autocast
    # Mixed precision under FSDP2's MixedPrecisionPolicy: the same model with the parameters it gathers and computes
    # with in bfloat16 (its batch norms' in float32) and what autograd saves so; None when not mixed.
    policy: "ModelShape | None" = None
    # Of saved_bytes, autocast's bfloat16 copies of the weights: one per device whatever its rows (not scaled by them)
    weight_copies: int = 0
    # How its tensor-parallel plan cuts it (measured where it declares one, in full precision); None where it has none
    tensor: TensorShape | None = None
    no_tensor: str | None = None  # why it has no tensor-parallel plan, in one sentence, when it has none

    @property
    def parameter_bytes(self) -> int:
        return sum(p.bytes for p in self.params)

    @property
    def gradient_bytes(self) -> int:
        return sum(p.grad_bytes for p in self.params)

    def activations(self, rows: int) -> int:
        """Bytes one device holds for `rows` rows between forward and backward: what autograd saved, the rows and
        the output, scaled from the example batch (each grows with the rows)."""
        if self.rows == 0 or rows == 0:
            return 0
        grows = self.saved_bytes - self.weight_copies + self.input_bytes + self.output_bytes
        return round(grows * rows / self.rows) + self.weight_copies


def state_bytes(params: list[Param] | tuple[Param, ...], optimizer: str, elements: int | None = None,
                every_trainable: bool = False) -> int:
    """The optimizer's state of `params` (or of `elements` of them, at their element size): of those backward
    reached, or of every trainable one (DataParallel gives each a gradient, zeros where forward never used it)."""
    per = STATE_PER_ELEMENT[optimizer]
    trained = [p for p in params if p.trainable and (p.reached or every_trainable)]
    if elements is not None:
        size = trained[0].element_size if trained else 4
        return per * elements * size
    return per * sum(p.bytes for p in trained)


def ring_share(devices: int) -> float:
    """(W-1)/W: what a ring all-gather or reduce-scatter sends of the whole tensor, per device."""
    return (devices - 1) / devices if devices > 1 else 0.0


def rows_per_device(rows: int, devices: int) -> list[int]:
    """A batch's rows over the devices as torch.chunk and DistributedSampler share them: ceil(rows / W) each, the
    last ones fewer (DistributedSampler pads; the planned figures take the largest share for every device)."""
    each = -(-rows // devices)
    return [each] * devices


class Devices(list):
    """An engine's planned devices, named more closely than by its label where its options change what it is (FSDP
    over tensor parallelism), with the settings it resolved them to (a degree of 0 made every GPU): the plan
    document's label and options for it."""

    def __init__(self, devices: list[dict], label: str, options: dict):
        super().__init__(devices)
        self.label, self.options = label, options


def device(parameters: int, gradients: int, state: int, activations: int, sent: float) -> dict[str, int]:
    return {"parameters": int(parameters), "gradients": int(gradients), "optimizer state": int(state),
            "activations": int(activations), "sent": int(round(sent))}
