"""Modules nobody here wrote, recorded with dpviz.record under DataParallel (simulated) and DDP (2 ranks), each held
against a plain run of the same module on the same batch: the output's shape, the rows each device got, and the
weights after one training step (so the gradients: SGD with momentum's first step moves each weight by lr x grad)."""
import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DistributedSampler

import dpviz
from dpviz.engines.workload.own import OwnModelError
from dpviz.engines.workload.tutorial_data import LEARNING_RATE
from dpviz.trace import json_io

ROWS = 8
DP_GPUS = 3
RANKS = 2


class Block(nn.Module):
    """A ResNet basic block, GroupNorm for BatchNorm: a device's statistics are then its rows' own."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(channels, channels, 3, padding=1), nn.Conv2d(channels, channels, 3, padding=1)
        self.norm1, self.norm2 = nn.GroupNorm(2, channels), nn.GroupNorm(2, channels)

    def forward(self, x):
        return F.relu(x + self.norm2(self.conv2(F.relu(self.norm1(self.conv1(x))))))


class SmallResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.blocks = nn.Sequential(Block(8), Block(8))
        self.head = nn.Linear(8, 5)

    def forward(self, images):
        return self.head(self.blocks(self.stem(images)).mean(dim=(2, 3)))


class LanguageModel(nn.Module):
    def __init__(self, vocabulary: int = 40):
        super().__init__()
        self.embed = nn.Embedding(vocabulary, 16)
        self.lstm = nn.LSTM(16, 24, batch_first=True)
        self.head = nn.Linear(24, vocabulary)

    def forward(self, tokens):
        return self.head(self.lstm(self.embed(tokens))[0])


class TiedLanguageModel(nn.Module):
    """A language model whose output layer shares the embedding's weight, as GPT-2's does."""

    def __init__(self, vocabulary: int = 40):
        super().__init__()
        self.embed = nn.Embedding(vocabulary, 16)
        self.lstm = nn.LSTM(16, 16, batch_first=True)
        self.out = nn.Linear(16, vocabulary, bias=False)
        self.out.weight = self.embed.weight

    def forward(self, tokens):
        return self.out(self.lstm(self.embed(tokens))[0])


def next_token(output, tokens):
    return F.cross_entropy(output[:, :-1].reshape(-1, output.shape[-1]), tokens[:, 1:].reshape(-1))


class Weighted(nn.Module):
    """Takes a dict: features and a weight per row."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, batch):
        return self.fc(batch["features"]) * batch["weight"][:, None]


class FrozenEncoder(nn.Module):
    """A frozen (no-grad) encoder under a trained head."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(6, 16), nn.ReLU()).requires_grad_(False)
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        return self.head(self.encoder(x))


def transformer():
    return nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32, dropout=0.0, batch_first=True)


def mean_loss(output, batch):
    return output.mean()


def _generator():
    return torch.Generator().manual_seed(0)


CASES = {  # name: (build, batch, loss)
    "transformer": (transformer, lambda: torch.randn(ROWS, 5, 16, generator=_generator()), mean_loss),
    "lstm_lm": (LanguageModel, lambda: torch.randint(0, 40, (ROWS, 10), generator=_generator()), next_token),
    "tied_lm": (TiedLanguageModel, lambda: torch.randint(0, 40, (ROWS, 10), generator=_generator()), next_token),
    "resnet": (SmallResNet, lambda: torch.randn(ROWS, 3, 8, 8, generator=_generator()), mean_loss),
    "dict": (Weighted, lambda: {"features": torch.randn(ROWS, 6, generator=_generator()),
                                "weight": torch.rand(ROWS, generator=_generator())}, mean_loss),
    "frozen": (FrozenEncoder, lambda: torch.randn(ROWS, 6, generator=_generator()), mean_loss),
}


def plain_step(model: nn.Module, batch, loss) -> tuple[nn.Module, torch.Tensor]:
    """The oracle: the module alone on the whole batch, one SGD step."""
    plain = copy.deepcopy(model)
    output = plain(batch)
    loss(output, batch).backward()
    with torch.no_grad():
        for p in plain.parameters():
            if p.grad is not None:
                p -= LEARNING_RATE * p.grad
    return plain, output


def expected_rows(engine: str) -> list[int]:
    if engine == "dp":
        return [len(c) for c in torch.arange(ROWS).chunk(DP_GPUS)]
    return [len(list(DistributedSampler(range(ROWS), num_replicas=RANKS, rank=r, shuffle=False))) for r in range(RANKS)]


@pytest.mark.parametrize("engine", ["dp", "ddp", "zero1", "fsdp"])  # ZeRO-1 and FSDP: shards of the state
@pytest.mark.parametrize("case", list(CASES))
def test_a_module_trains_as_it_would_alone(case, engine):
    build, make_batch, loss = CASES[case]
    torch.manual_seed(0)
    model, batch = build(), make_batch()
    plain, output = plain_step(model, batch, loss)
    before = copy.deepcopy(model)
    trace = dpviz.record(model, batch, engine=engine, gpus=DP_GPUS if engine == "dp" else RANKS, train=True,
                         shuffle=False, loss=loss)
    assert trace.failure is None
    assert [s.rows for s in trace.replicas(0)] == expected_rows(engine)
    assert trace.batches[0].sample_ids == list(range(ROWS)) or engine != "dp"
    assert sorted(trace.batches[0].sample_ids) == list(range(ROWS))
    assert trace.batches[0].output_shape == list(output.shape)
    for (name, after), (_, alone), (_, start) in zip(model.named_parameters(), plain.named_parameters(),
                                                    before.named_parameters()):
        torch.testing.assert_close(after, alone, atol=2e-5, rtol=1e-4, msg=name)
        if not start.requires_grad:  # the frozen encoder stays as it was
            assert torch.equal(after, start), name
    fact = json_io.loads(json_io.dumps(trace)).facts["model"]
    assert fact["class"] == type(model).__name__
    assert fact["parameters"] == sum(p.numel() for p in model.parameters())
    assert fact["trainable"] == sum(p.numel() for p in model.parameters() if p.requires_grad)


def test_batches_of_any_size_take_the_examples_rows_in_turn():
    model, batch = Weighted(), CASES["dict"][1]()
    trace = dpviz.record(model, batch, gpus=4, batch_size=5, data_size=13, shuffle=False)
    assert [[s.rows for s in trace.replicas(b.index)] for b in trace.batches] == [[2, 2, 1], [2, 2, 1], [1, 1, 1]]
    assert [b.sample_ids for b in trace.batches][-1] == [10, 11, 12]  # example rows 2, 3, 4
    assert {a.path for a in trace.arguments} == {"batch['features']", "batch['weight']"}


def test_several_arguments_and_a_keyword_through_args():
    class TwoInputs(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x, mask, scale=1.0):
            return self.fc(x * mask) * scale

    x, mask = torch.randn(6, 4), torch.ones(6, 4)
    trace = dpviz.record(TwoInputs(), dpviz.Args(x, mask, scale=0.5), gpus=4)
    # 6 rows over 4 devices: torch.chunk makes 3 chunks, and the keyword a 4th replica with no positional
    # argument, which fails as it fails under nn.DataParallel.
    assert [s.rows for s in trace.replicas(0)] == [2, 2, 2, 0]
    assert "forward() missing 2 required positional arguments: 'x' and 'mask'" in trace.failure.message
    assert "return self.fc(x * mask) * scale" not in json_io.dumps(trace)  # the traceback without its source lines
    json_io.loads(json_io.dumps(trace))


def test_not_a_module_is_refused_in_one_sentence():
    with pytest.raises(OwnModelError, match="the model must be a torch.nn.Module, got a function"):
        dpviz.record(transformer, torch.randn(4, 5, 16))


class Normalised(nn.Module):
    """A Linear after a BatchNorm1d: its running statistics are buffers a training run updates."""

    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm1d(6)
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        return self.fc(self.norm(x))


@pytest.mark.parametrize("engine", ["dp", "ddp", "zero1", "fsdp"])
def test_after_training_the_module_holds_the_buffers_torch_left(engine):
    """What comes back is what torch left: the trained parameters and the buffers of the first device or rank (its
    BatchNorm saw that device's rows; DDP broadcasts rank 0's buffers to every rank before each forward)."""
    torch.manual_seed(0)
    model, batch = Normalised(), torch.randn(ROWS, 6, generator=_generator())
    lanes = DP_GPUS if engine == "dp" else RANKS
    first = list(range(len(batch.chunk(DP_GPUS)[0]))) if engine == "dp" else \
        list(DistributedSampler(range(ROWS), num_replicas=RANKS, rank=0, shuffle=False))
    oracle = copy.deepcopy(model).train()
    oracle.norm(batch[first])  # the first lane's rows through its BatchNorm, in training mode
    trace = dpviz.record(model, batch, engine=engine, gpus=lanes, train=True, shuffle=False, loss=mean_loss)
    assert trace.failure is None
    assert int(model.norm.num_batches_tracked) == 1
    torch.testing.assert_close(model.norm.running_mean, oracle.norm.running_mean)
    torch.testing.assert_close(model.norm.running_var, oracle.norm.running_var)


class Heads(nn.Module):
    """Returns a dict, as many models do: its first tensor is what DataParallel's gather and DDP's output show."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        return {"logits": self.fc(x), "norm": x.norm(dim=1)}


@pytest.mark.parametrize("engine", ["dp", "ddp"])
def test_a_dict_output_records_its_shapes_under_dataparallel_as_under_ddp(engine):
    lanes = DP_GPUS if engine == "dp" else RANKS
    trace = dpviz.record(Heads(), torch.randn(ROWS, 6, generator=_generator()), engine=engine, gpus=lanes, shuffle=False)
    assert trace.failure is None
    rows = [len(c) for c in torch.arange(ROWS).chunk(DP_GPUS)] if engine == "dp" else expected_rows(engine)
    assert [s.output_shape for s in trace.replicas(0)] == [[n, 3] for n in rows]
    assert trace.batches[0].output_shape == [ROWS, 3]


def test_fsdp_shards_a_tied_parameter_once_and_says_where():
    torch.manual_seed(0)
    model, batch = TiedLanguageModel(), torch.randint(0, 40, (ROWS, 10), generator=_generator())
    trace = dpviz.record(model, batch, engine="fsdp", gpus=RANKS, train=True, shuffle=False, loss=next_token)
    assert trace.failure is None and model.out.weight is model.embed.weight  # still one parameter, trained
    modules = trace.facts["modules"][0]
    holders = [m["name"] for m in modules if "embed.weight = out.weight" in m["params"]]
    assert holders == [""]  # the root's group: their lowest common ancestor is the model itself
    assert all("embed" not in m["name"] and "out" != m["name"] for m in modules)
    from dpviz.analysis.explain import explain
    assert "**Tied parameters.** `embed.weight = out.weight` is one parameter: FSDP shards it once, in the group of " \
           "the model itself" in " ".join(explain(trace))


def test_a_sequential_of_ones_own_trains_as_a_pipeline_as_it_would_alone_on_its_microbatches():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 3))
    batch = torch.randn(ROWS, 6, generator=_generator())
    plain = copy.deepcopy(model)  # the oracle: the mean of the microbatches' losses, one SGD step
    sum(mean_loss(plain(chunk), chunk) for chunk in batch.tensor_split(4)).div(4).backward()
    with torch.no_grad():
        for p in plain.parameters():
            p -= LEARNING_RATE * p.grad
    trace = dpviz.record(model, batch, engine="pipeline", gpus=3, train=True, shuffle=False, loss=mean_loss,
                         microbatches=4)
    assert trace.failure is None and trace.facts["layers"] == [["0", "1"], ["2", "3"], ["4"]]  # 5 children: 2, 2, 1
    assert [s.rows for s in trace.spans if s.phase == "forward" and s.lane == 0] == [ROWS // 4] * 4
    for (name, got), want in zip(model.named_parameters(), plain.parameters()):  # every stage's, back in the module
        assert torch.allclose(got, want, atol=1e-6), name


@pytest.mark.parametrize("model, batch, words", [
    (lambda: nn.Linear(6, 3), lambda: torch.randn(ROWS, 6), "not an nn.Sequential"),
    (lambda: nn.Sequential(nn.Linear(6, 3), nn.ReLU()), lambda: torch.randn(ROWS, 6), "has 2 layers, so it cannot be cut into 3"),
    (lambda: nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 3)), lambda: (torch.randn(ROWS, 6), torch.randn(ROWS, 6)),
     "not one tensor"),
])
def test_what_a_pipeline_cannot_cut_or_pass_on_is_one_sentence_before_any_stage_starts(model, batch, words):
    with pytest.raises(OwnModelError, match=words) as error:
        dpviz.record(model(), batch(), engine="pipeline", gpus=3, train=True, microbatches=4)
    assert str(error.value).endswith(".") and "\n" not in str(error.value)
