"""Seeded construction without torch's global RNG: `with seeded(7): model = nn.Linear(5, 2)`.

A hosted page runs every visitor's session as a thread of one process, and torch's default generator
is process-wide: seeding it (even inside `fork_rng`) while another session draws from it gives both
the wrong numbers. `seeded` instead hands a generator of its own to every random draw made on the
calling thread, through a torch function mode (mode stacks are thread-local). A module's own
`reset_parameters` then draws exactly what it would after `torch.manual_seed(seed)`, since a fresh
`torch.Generator` seeded alike yields the same stream, and the global generator is never touched.
"""
from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

# Samplers that draw from the default generator when none is passed (torch.* and Tensor.* names).
_SAMPLERS = frozenset({
    "rand", "randn", "randint", "randperm", "normal", "bernoulli", "multinomial", "poisson",
    "uniform_", "normal_", "random_", "bernoulli_", "exponential_", "geometric_", "log_normal_", "cauchy_",
})


class seeded(TorchFunctionMode):
    """Within this context, random draws on this thread use a generator seeded with `seed`."""

    def __init__(self, seed: int | torch.Generator):
        super().__init__()
        self.generator = seed if isinstance(seed, torch.Generator) else torch.Generator().manual_seed(seed)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        # nn.init functions take a generator argument and pass it down; samplers called without one
        # would otherwise fall back to the process-wide default generator.
        if kwargs.get("generator", 0) is None or ("generator" not in kwargs and getattr(func, "__name__", "") in _SAMPLERS):
            kwargs["generator"] = self.generator
        return func(*args, **kwargs)
