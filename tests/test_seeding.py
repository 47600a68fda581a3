"""seeded(seed): the weights torch.manual_seed(seed) gives, without touching the global RNG, per thread."""
import threading

import pytest
import torch
from torch import nn

from dpviz.config import MODELS
from dpviz.engines.workload.models import build_model
from dpviz.engines.workload.seeding import seeded


def _params(module: nn.Module) -> list[torch.Tensor]:
    return [t.detach().clone() for t in (*module.parameters(), *module.buffers())]


@pytest.mark.parametrize("name", MODELS)
def test_every_model_gets_the_weights_torch_manual_seed_gives(name):
    with torch.random.fork_rng(devices=[]):  # the oracle: torch's own global seeding
        torch.manual_seed(7)
        expected, _ = build_model(name, 5, 3)
    before = torch.get_rng_state()
    with seeded(7):
        built, _ = build_model(name, 5, 3)
    assert torch.equal(torch.get_rng_state(), before)
    assert all(torch.equal(a, b) for a, b in zip(_params(built), _params(expected), strict=True))


def test_samplers_called_without_a_generator_draw_from_the_seeded_one():
    before = torch.get_rng_state()
    with seeded(3):
        drawn = [torch.randn(4), torch.rand(3), torch.randint(0, 9, (5,)), torch.randperm(6), torch.empty(4).uniform_()]
    g = torch.Generator().manual_seed(3)
    expected = [torch.randn(4, generator=g), torch.rand(3, generator=g), torch.randint(0, 9, (5,), generator=g),
                torch.randperm(6, generator=g), torch.empty(4).uniform_(generator=g)]
    assert all(torch.equal(a, b) for a, b in zip(drawn, expected))
    assert torch.equal(torch.get_rng_state(), before)


def test_a_generator_passed_explicitly_is_kept():
    mine = torch.Generator().manual_seed(11)
    with seeded(3):
        drawn = torch.randn(4, generator=mine)
    assert torch.equal(drawn, torch.randn(4, generator=torch.Generator().manual_seed(11)))


def test_other_threads_keep_drawing_from_the_global_generator():
    # Another thread seeds and draws from torch's default generator while this one builds models
    # under seeded(): its numbers must be exactly what they are alone.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        alone = [torch.rand(50) for _ in range(200)]
        stop, got = threading.Event(), []

        def builder():
            while not stop.is_set():
                with seeded(1):
                    nn.Linear(64, 64)

        thread = threading.Thread(target=builder)
        thread.start()
        try:
            torch.manual_seed(5)
            got = [torch.rand(50) for _ in range(200)]
        finally:
            stop.set()
            thread.join()
    assert all(torch.equal(a, b) for a, b in zip(got, alone, strict=True))
