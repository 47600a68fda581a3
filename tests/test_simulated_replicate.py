"""replicate's direct path against torch's own: for a module that keeps nn.Module's attribute machinery,
replicate writes the replicas' dicts itself instead of calling setattr; the replicas must come out
exactly as `_replicate_for_data_parallel` plus torch's setattr calls leave them (the path replicate
takes for every other module, which tests/test_simulated.py checks against DataParallel's behaviour)."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from dpviz import RunConfig
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.config import MODELS
from dpviz.engines.dp import simulated


class Shared(nn.Module):
    """The same child under two names, a parameter-less child, a None parameter and a None buffer."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(5, 3, bias=False)
        self.again = self.inner
        self.act = nn.ReLU()
        self.norm = nn.BatchNorm1d(3, track_running_stats=False)
        self.register_buffer("scale", torch.ones(3))
        self.register_buffer("offset", torch.zeros(3), persistent=False)
        self.register_buffer("missing", None)
        self.register_parameter("unused", None)
        self.note = "kept by reference"

    def forward(self, x):
        return self.norm(self.act(self.again(x))) * self.scale + self.offset


class WithProperty(nn.Module):
    """A parameter named like a class attribute (put in place by hand: register_parameter refuses it).
    setattr on a replica calls the property's setter, so torch's path must be taken."""

    weight = property(lambda self: self.__dict__.get("_w"), lambda self, value: self.__dict__.__setitem__("_w", value))

    def __init__(self):
        super().__init__()
        self._parameters["weight"] = nn.Parameter(torch.ones(2))
        self.register_parameter("bias", nn.Parameter(torch.zeros(2)))


def app_models() -> list[tuple[str, nn.Module]]:
    return [(name, tutorial.build(RunConfig(model=name, train=True))[0]) for name in MODELS]


MODULES = app_models() + [("shared", Shared()), ("property", WithProperty()),
                          ("gru", nn.GRU(5, 4, batch_first=True)), ("sequential", nn.Sequential(nn.Linear(5, 4), nn.Tanh()))]


def replicas(module: nn.Module, devices: int, detach: bool, plain: bool, monkeypatch) -> list[nn.Module]:
    with monkeypatch.context() as patch:
        if not plain:
            patch.setattr(simulated, "_plain", lambda module: False)  # torch's setattr for every module
        return simulated.replicate(module, list(range(devices)), detach)


def same(a, b, original: nn.Module, where: str) -> None:
    """`a` and `b` are the same replica state: the same keys in the same order, the same objects where
    torch shares them with the original, tensors equal and of the same kind where they are copies."""
    assert type(a) is type(b), where
    if isinstance(a, nn.Module):
        same(a.__dict__, b.__dict__, original, f"{where}.__dict__")
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            same(a[key], b[key], original, f"{where}[{key!r}]")
    elif isinstance(a, torch.Tensor):
        originals = {id(t) for t in (*original.parameters(), *original.buffers())}
        assert (id(a) in originals, type(a), a.requires_grad, a.grad_fn is None) == \
               (id(b) in originals, type(b), b.requires_grad, b.grad_fn is None), where
        assert id(a) not in originals or a is b, where
        torch.testing.assert_close(a, b)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, original, f"{where}[{i}]")
    elif isinstance(a, set) or a is None or isinstance(a, (str, int, float, bool)):
        assert a == b, where
    else:
        assert a is b, where  # hooks dicts' contents, functions, anything else: shared by reference


@pytest.mark.parametrize("name,module", MODULES, ids=[name for name, _ in MODULES])
@pytest.mark.parametrize("detach", [False, True])
def test_replicas_are_exactly_torchs(name, module, detach, monkeypatch):
    outcomes = []
    for plain in (True, False):
        with torch.set_grad_enabled(not detach):
            try:
                outcomes.append(replicas(module, 3, detach, plain, monkeypatch))
            except Exception as error:  # torch's setattr may refuse (the property under detach)
                outcomes.append(f"{type(error).__name__}: {error}")
    fast, slow = outcomes
    if isinstance(slow, str):
        assert fast == slow
        return
    for j, (a, b) in enumerate(zip(fast, slow)):
        for (path, sub_a), (_, sub_b) in zip(a.named_modules(remove_duplicate=False),
                                             b.named_modules(remove_duplicate=False)):
            same(sub_a, sub_b, module, f"replica {j} {path or 'root'}")
        # Shared children stay shared within a replica, as torch's module_index wiring makes them.
        assert [id(m) for m in a.modules()].__len__() == [id(m) for m in b.modules()].__len__()


def test_the_direct_path_is_taken_for_the_apps_models():
    """The models a run uses take the direct path (else the speed-up is lost without a failure)."""
    for name, module in app_models():
        plain = [m for m in module.modules() if simulated._plain(m)]
        other = [type(m).__name__ for m in module.modules() if not simulated._plain(m)]
        assert plain and set(other) <= {"GRU"}, name  # RNNBase overrides _replicate_for_data_parallel


def test_a_module_whose_setattr_does_more_takes_torchs_path():
    assert not simulated._plain(WithProperty())
    assert not simulated._plain(nn.GRU(5, 4))
    assert simulated._plain(nn.Linear(5, 2))
