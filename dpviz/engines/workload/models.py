"""The models a run can wrap in DataParallel: the tutorial's nn.Linear and a few that show more.

    model, dim = build_model("gru_dim1", input_size=5, output_size=2)   # dim: DataParallel's split dim
    row_shape("cnn", 5)                                                  # (1, 5, 5): one image per row

Each one is small on purpose: what matters is how DataParallel treats it, not what it learns.
`mlp` has a BatchNorm1d (which needs two rows per chunk in training), `ffn` is the same without it (the
model tensor parallelism cuts), `cnn` a BatchNorm2d, `gru` takes
its batch on dim 0 and `gru_dim1` on dim 1 (time first, DataParallel's `dim=1`), `loss` returns a
0-dim loss from forward and `counter` changes its own state in forward. `transformer` takes token ids and keeps
its blocks in an nn.ModuleList: FSDP shards it block by block, as models that do not fit one GPU are sharded.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from dpviz.catalogue import BLOCKS, HEADS, MODEL_SPECS, SEQUENCE_LENGTH, row_shape  # noqa: F401  a model's data, named here too
from dpviz.engines.workload.seeding import seeded

HIDDEN = 16  # hidden width of the MLP and the GRU, and the transformer's width
CHANNELS = 8  # the CNN's feature maps

LABELS = {name: spec.label for name, spec in MODEL_SPECS.items()}  # what the page and the CLI call each model


class Linear(nn.Module):
    """The tutorial's model: one nn.Linear that, when verbose, prints the sizes each replica sees."""

    def __init__(self, input_size: int, output_size: int, verbose: bool = False):
        super().__init__()
        self.fc = nn.Linear(input_size, output_size)
        self.verbose = verbose

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        output = self.fc(input)
        if self.verbose:
            print("\tIn Model: input size", input.size(), "output size", output.size())
        return output


class MLP(nn.Module):
    """Linear -> BatchNorm1d -> ReLU -> Linear: BatchNorm needs more than one row per chunk in training."""

    def __init__(self, input_size: int, output_size: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(input_size, HIDDEN), nn.BatchNorm1d(HIDDEN), nn.ReLU(),
                                 nn.Linear(HIDDEN, output_size))

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return self.net(input)


class FFN(nn.Module):
    """Linear -> GELU -> Linear, no BatchNorm: Megatron's MLP, which tensor parallelism cuts column- then row-wise
    (the GELU runs on each rank's own hidden features)."""

    def __init__(self, input_size: int, output_size: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(input_size, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, output_size))

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return self.net(input)


class CNN(nn.Module):
    """Two 3x3 convolutions with BatchNorm2d on 1 x s x s images, pooled to 2 x 2, then a Linear."""

    def __init__(self, input_size: int, output_size: int):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, CHANNELS, 3, padding=1), nn.BatchNorm2d(CHANNELS), nn.ReLU(),
            nn.Conv2d(CHANNELS, CHANNELS, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
        )
        self.head = nn.Linear(CHANNELS * 4, output_size)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(input))


class GRU(nn.Module):
    """A one-layer GRU and a Linear on every step; `batch_first` picks where the batch sits (dim 0 or 1).

    The output keeps the input's layout, (batch, time, out) or (time, batch, out), so DataParallel
    gathers it along the same dim it split the input on.
    """

    def __init__(self, input_size: int, output_size: int, batch_first: bool):
        super().__init__()
        self.gru = nn.GRU(input_size, HIDDEN, batch_first=batch_first)
        self.head = nn.Linear(HIDDEN, output_size)

    def forward(self, input: torch.Tensor, hidden: torch.Tensor | None = None) -> torch.Tensor:
        output, _ = self.gru(input, hidden)
        return self.head(output)


class LossModel(nn.Module):
    """The tutorial's Linear, returning the MSE against a fixed teacher: a 0-dim tensor per replica,
    which DataParallel's gather turns into a vector (with a warning)."""

    def __init__(self, input_size: int, output_size: int):
        super().__init__()
        self.fc = nn.Linear(input_size, output_size)
        with seeded(12345):  # the same teacher in every run, drawn without the process-wide RNG
            self.teacher = nn.Linear(input_size, output_size).requires_grad_(False)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(self.fc(input), self.teacher(input))


class Counter(nn.Module):
    """The tutorial's Linear that keeps count in forward, two ways: rebinding a Python attribute
    (`self.calls += 1`) and adding in place to a buffer (`self.rows_seen += rows`)."""

    def __init__(self, input_size: int, output_size: int):
        super().__init__()
        self.fc = nn.Linear(input_size, output_size)
        self.calls = 0
        self.register_buffer("rows_seen", torch.zeros((), dtype=torch.long))

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        self.calls += 1  # on a replica this rebinds the replica's own attribute: gone after the batch
        self.rows_seen += input.shape[0]  # in place: lands in the original buffer only through replica 0
        return self.fc(input)


class Unused(nn.Module):
    """The tutorial's Linear beside a second Linear that forward never calls: its parameters get no
    gradient. DataParallel sums nothing into them; DistributedDataParallel waits for them in vain and
    refuses the next step unless find_unused_parameters=True."""

    def __init__(self, input_size: int, output_size: int):
        super().__init__()
        self.fc = nn.Linear(input_size, output_size)
        self.spare = nn.Linear(input_size, output_size)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return self.fc(input)


class Attention(nn.Module):
    """Causal self-attention over the row's tokens. Queries, keys and values come from three Linears (torchtitan's
    wq, wk, wv), so that a column-wise cut of each hands a tensor-parallel rank whole heads of all three; forward runs
    the heads its wq holds (all of them in one process, heads / W on each of W ranks)."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.head_width = width // heads
        # No bias: a key's bias adds the same to every score of a query, which softmax takes away, so its gradient is
        # zero but for rounding, and Adam would step on that rounding.
        self.wq = nn.Linear(width, width, bias=False)
        self.wk = nn.Linear(width, width, bias=False)
        self.wv = nn.Linear(width, width, bias=False)
        self.out = nn.Linear(width, width)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        rows, steps, _ = h.shape
        # -1 heads: as many as the Linear's outputs hold.
        q, k, v = (w(h).view(rows, steps, -1, self.head_width).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(attended.transpose(1, 2).reshape(rows, steps, -1))


class Block(nn.Module):
    """A pre-norm transformer block: causal self-attention, then an MLP, each added to its input."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.attention_norm = nn.LayerNorm(width)
        self.attention = Attention(width, heads)
        self.mlp_norm = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class TokensIn(nn.Module):
    """The transformer's first layer for a pipeline: token embedding plus position embedding (its forward's first
    line), holding the model's own embeddings."""

    def __init__(self, embed: nn.Embedding, position: nn.Embedding):
        super().__init__()
        self.embed, self.position = embed, position

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return self.embed(input) + self.position(torch.arange(input.shape[1], device=input.device))


class LastTokenOut(nn.Module):
    """The transformer's last layer for a pipeline: its norm and head on the last token (its forward's last line)."""

    def __init__(self, norm: nn.LayerNorm, head: nn.Linear):
        super().__init__()
        self.norm, self.head = norm, head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(x[:, -1]))


class Transformer(nn.Module):
    """Token and position embeddings, BLOCKS blocks in an nn.ModuleList, a LayerNorm and a Linear on the last
    token, which attention lets see the whole row: (rows, SEQUENCE_LENGTH) token ids below input_size in,
    (rows, output_size) out."""

    def __init__(self, input_size: int, output_size: int, *, width: int = HIDDEN, heads: int = HEADS,
                 blocks: int = BLOCKS, sequence: int = SEQUENCE_LENGTH):
        super().__init__()  # the catalogue's at its defaults; a plan builds it at real sizes (dpviz.engines.plan)
        self.embed = nn.Embedding(input_size, width)
        self.position = nn.Embedding(sequence, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(blocks))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, output_size)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        x = self.embed(input) + self.position(torch.arange(input.shape[1], device=input.device))
        for block in self.blocks:
            x = block(x)
        # A fresh tensor out, not a view: FSDP2 warns that an in-place op on a module's view output skips its hooks.
        return self.head(self.norm(x[:, -1]))

    def pipeline_layer(self, name: str) -> nn.Module:
        """The layer its declaration names as a group (dpviz.catalogue: "embed + position", "norm + head"): its
        forward's first and last lines, as modules holding its own embeddings, norm and head, so that the stages
        together compute exactly what forward does."""
        groups = {"embed + position": lambda: TokensIn(self.embed, self.position),
                  "norm + head": lambda: LastTokenOut(self.norm, self.head)}
        if name not in groups:
            raise ValueError(f"the transformer runs no layer {name!r}; its groups are {' and '.join(groups)}.")
        return groups[name]()


def random_rows(name: str, input_size: int, length: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """`length` random rows of model `name`'s data: normal numbers, or token ids below input_size."""
    shape = (length, *row_shape(name, input_size))
    if MODEL_SPECS[name].layout == "tokens":
        return torch.randint(input_size, shape, generator=generator)
    return torch.randn(shape, generator=generator)


def build_real(name: str, size: str, rows: int) -> tuple[nn.Module, torch.Tensor]:
    """Catalogue model `name` at its declared real size `size` (dpviz.catalogue.RealSize), and an example batch of
    `rows` rows of the row it declares (token ids 0 for a model of tokens). Called under torch.device("meta")."""
    spec = MODEL_SPECS[name]
    real = spec.sizes[size]
    model = globals()[spec.builder](real.input_size, real.output_size, **{**spec.options, **real.options})
    if spec.layout == "tokens":
        return model, torch.zeros(rows, *real.row, dtype=torch.long)
    return model, torch.zeros(rows, *real.row)


def build_model(name: str, input_size: int, output_size: int) -> tuple[nn.Module, int]:
    """The model `name` (an entry of dpviz.catalogue.MODEL_SPECS) and the dim DataParallel must split its batch on."""
    if name not in MODEL_SPECS:
        raise ValueError(f"model must be one of {', '.join(MODEL_SPECS)}, got {name!r}")
    spec = MODEL_SPECS[name]
    return globals()[spec.builder](input_size, output_size, **spec.options), spec.dim
