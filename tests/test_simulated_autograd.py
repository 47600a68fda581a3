"""SimulatedDataParallel's way back against PyTorch: one Broadcast node per replicate call that sums
every copy's gradient (zeros for a copy that got none), sparse gradients summed apart from dense ones.

A plain forward/backward of the same module on the whole batch is the oracle for the numbers; the rules
themselves are read from torch/nn/parallel/_functions.py (Broadcast, ReduceAddCoalesced), replicate.py
and comm.py (reduce_add_coalesced), whose CUDA-only code cannot run here.
"""
from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from dpviz.engines.dp.simulated import Broadcast, SimulatedDataParallel, current_device, replicate


def dp(module: nn.Module, k: int, **kw) -> SimulatedDataParallel:
    return SimulatedDataParallel(module, device_ids=list(range(k)), **kw)


def graph_nodes(tensor: torch.Tensor) -> list:
    """Every autograd node reachable from `tensor`, each once."""
    seen, stack, nodes = set(), [tensor.grad_fn], []
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        nodes.append(node)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return nodes


def broadcast_nodes(tensor: torch.Tensor) -> list:
    return [node for node in graph_nodes(tensor) if type(node).__name__ == f"{Broadcast.__name__}Backward"]


class TwoHeads(nn.Module):
    """Two Linear layers, of which forward uses only the first."""

    def __init__(self):
        super().__init__()
        self.used, self.unused = nn.Linear(5, 3), nn.Linear(5, 3)

    def forward(self, x):
        return self.used(x)


def assert_grads_equal(module: nn.Module, reference: nn.Module) -> None:
    for (name, p), p_ref in zip(module.named_parameters(), reference.parameters()):
        assert (p.grad is None) == (p_ref.grad is None), name
        if p.grad is not None:
            torch.testing.assert_close(p.grad, p_ref.grad, msg=name)


# ---------------------------------------------------------------- unused parameters

@pytest.mark.parametrize("k", [2, 3, 4])
def test_unused_parameters_get_zero_gradients(k):
    """Broadcast.backward gets zeros for copies nothing used (materialised grads) and ReduceAddCoalesced
    sums them: the unused layer ends with zero gradients, not None; the used one equals a plain run."""
    torch.manual_seed(k)
    module, x = TwoHeads(), torch.randn(10, 5)
    reference = copy.deepcopy(module)
    dp(module, k)(x).pow(2).sum().backward()
    reference(x).pow(2).sum().backward()

    for p in module.unused.parameters():
        assert p.grad is not None and p.grad.layout == torch.strided
        assert torch.equal(p.grad, torch.zeros_like(p))
    assert all(p.grad is None for p in reference.unused.parameters())  # a plain run leaves them alone
    for p, p_ref in zip(module.used.parameters(), reference.used.parameters()):
        torch.testing.assert_close(p.grad, p_ref.grad)


@pytest.mark.parametrize("k", [2, 3])
def test_sgd_moves_unused_parameters_as_with_a_zero_gradient(k):
    """SGD with momentum and weight decay moves the unused layer exactly as torch.optim does given a
    zero gradient; the used layer trains as on one device."""
    torch.manual_seed(10 + k)
    module = TwoHeads()
    reference = copy.deepcopy(module)
    unused_before = [p.detach().clone() for p in module.unused.parameters()]
    opt = torch.optim.SGD(module.parameters(), lr=0.1, momentum=0.9, weight_decay=0.05)
    opt_ref = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9, weight_decay=0.05)
    model = dp(module, k)
    for step in range(4):
        x = torch.randn(9, 5)
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
        opt_ref.zero_grad()
        reference(x).pow(2).mean().backward()
        for p in reference.unused.parameters():
            p.grad = torch.zeros_like(p)  # what real DataParallel hands the optimizer
        opt_ref.step()
    for (name, p), p_ref in zip(module.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p, p_ref, msg=name)
    assert not any(torch.equal(p, b) for p, b in zip(module.unused.parameters(), unused_before))


def test_single_device_does_not_replicate_so_unused_gradients_stay_none():
    """len(device_ids) == 1 is a direct call (facts §1 step 6): no Broadcast, gradients as a plain run."""
    torch.manual_seed(0)
    module, x = TwoHeads(), torch.randn(6, 5)
    reference = copy.deepcopy(module)
    out = dp(module, 1)(x)
    assert broadcast_nodes(out) == []
    out.sum().backward()
    reference(x).sum().backward()
    assert_grads_equal(module, reference)
    assert all(p.grad is None for p in module.unused.parameters())


class OnlyOn(nn.Module):
    """A Linear for every replica, plus a bias that only the replica on device `where` adds."""

    def __init__(self, where: int):
        super().__init__()
        self.where, self.linear, self.extra = where, nn.Linear(5, 2), nn.Parameter(torch.randn(2))

    def forward(self, x):
        out = self.linear(x)
        return out + self.extra if current_device() == self.where else out


@pytest.mark.parametrize("where", [0, 1, 2])
def test_parameter_used_by_some_replicas_only(where):
    """A parameter used by one replica gets the sum of that replica's gradient and zeros from the
    others; the oracle adds it to that chunk's rows of a plain forward."""
    torch.manual_seed(where)
    module, x = OnlyOn(where), torch.randn(10, 5)
    reference = copy.deepcopy(module)
    dp(module, 3)(x).pow(2).sum().backward()

    chunks = list(reference.linear(x).split([len(c) for c in x.chunk(3)]))
    chunks[where] = chunks[where] + reference.extra
    torch.cat(chunks).pow(2).sum().backward()
    assert_grads_equal(module, reference)


# ---------------------------------------------------------------- the graph

@pytest.mark.parametrize("k", [2, 3])
def test_one_broadcast_node_per_replicate_call(k):
    """replicate sends all parameters through one Broadcast (replicate.py, _broadcast_coalesced_reshape):
    one node per forward, whose next functions are the module's parameters, unused ones included."""
    module = TwoHeads()
    model = dp(module, k)
    out = model(torch.randn(8, 5))
    nodes = broadcast_nodes(out)
    assert len(nodes) == 1
    leaves = [fn.variable for fn, _ in nodes[0].next_functions]
    assert [id(p) for p in leaves] == [id(p) for p in module.parameters()]
    assert len(broadcast_nodes(out + model(torch.randn(8, 5)))) == 2  # two forwards, two nodes


def test_replicate_makes_one_node_for_all_copies():
    """replicate() itself: every differentiable copy on every device hangs off one Broadcast node."""
    module = nn.Sequential(nn.Linear(5, 4), nn.Linear(4, 2))
    replicas = replicate(module, [0, 1, 2])
    grad_fns = {replica[i].__dict__[name].grad_fn for replica in replicas for i in (0, 1) for name in ("weight", "bias")}
    assert len(grad_fns) == 1 and type(next(iter(grad_fns))).__name__ == "BroadcastBackward"


def test_hooks_on_every_copy_fire_once_per_backward():
    """Broadcast's backward runs once for all copies, so a hook on each differentiable copy fires once
    per backward: with the gradient, or with None for a copy that got none (the observer counts on it)."""
    module = TwoHeads()
    replicas = replicate(module, [0, 1])
    fired: list[tuple[str, int, bool]] = []
    for j, replica in enumerate(replicas):
        for name in ("used", "unused"):
            for tensor in getattr(replica, name)._former_parameters.values():
                tensor.register_hook(lambda grad, name=name, j=j: fired.append((name, j, grad is None)))
    sum(r(torch.ones(2, 5)).sum() for r in replicas).backward()
    assert sorted(fired) == sorted([("used", j, False) for j in (0, 1)] * 2 + [("unused", j, True) for j in (0, 1)] * 2)


class GradBuffer(nn.Linear):
    """A Linear with a buffer that requires grad (scaled into the output)."""

    def __init__(self):
        super().__init__(5, 2)
        self.register_buffer("scale", torch.full((2,), 1.5, requires_grad=True))
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        return super().forward(x) * self.scale


def test_buffers_that_require_grad_get_their_own_broadcast():
    """Buffers that require grad go through a second Broadcast and get summed gradients; the others
    are plain copies (replicate.py, buffers_rg / buffers_not_rg)."""
    torch.manual_seed(1)
    module, x = GradBuffer(), torch.randn(9, 5)
    reference = copy.deepcopy(module)
    out = dp(module, 3)(x)
    assert len(broadcast_nodes(out)) == 2
    out.sum().backward()
    reference(x).sum().backward()
    torch.testing.assert_close(module.scale.grad, reference.scale.grad)
    assert_grads_equal(module, reference)


def test_no_graph_node_when_nothing_requires_grad():
    """Under no_grad replicate takes the detached path: no Broadcast node, no grad_fn anywhere."""
    module = TwoHeads()
    with torch.no_grad():
        out = dp(module, 3)(torch.randn(9, 5))
    assert out.grad_fn is None and not out.requires_grad


def test_detached_replicas_share_device_zero_tensors_as_is():
    """With detach, comm.broadcast_coalesced returns device 0's tensors as-is (comm.cpp): replica 0 holds
    the module's own Parameters and buffers; the others hold copies outside autograd."""
    module = nn.BatchNorm1d(3)
    replicas = replicate(module, [0, 1, 2], detach=True)
    assert replicas[0].weight is module.weight and replicas[0].running_mean is module.running_mean
    for replica in replicas[1:]:
        assert replica.weight.grad_fn is None and not replica.weight.requires_grad
        assert replica.weight.data_ptr() != module.weight.data_ptr()
        assert replica.running_mean.data_ptr() != module.running_mean.data_ptr()
        torch.testing.assert_close(replica.weight, module.weight)


def test_replica_zero_aliases_the_parameters_and_others_copy_them():
    """With grad, device 0's copies share the parameters' storage, the other devices' do not."""
    module = nn.Linear(5, 2)
    replicas = replicate(module, [0, 1, 2])
    assert replicas[0].weight.data_ptr() == module.weight.data_ptr()
    assert replicas[0].weight is not module.weight and not replicas[0].weight.is_leaf
    assert all(r.weight.data_ptr() != module.weight.data_ptr() for r in replicas[1:])


@pytest.mark.parametrize("channels_last", [False, True])
def test_each_copy_is_a_tensor_of_its_own(channels_last):
    """Every device's copy of every tensor has its own storage and version counter (comm.cpp's NOTE [ Version
    Counter in comm.*_coalesced ]): an in-place change to one replica's copy reaches no other replica; a
    contiguous parameter's copies are contiguous, a channels-last one's (cloned one by one) keep its layout."""
    module = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3))
    if channels_last:
        module = module.to(memory_format=torch.channels_last)
    for detach in (False, True):
        replicas = replicate(module, [0, 1, 2, 3], detach=detach)
        copies = [r[0].weight for r in replicas[1:]] + [r[1].running_mean for r in replicas[1:]]
        assert len({c.untyped_storage().data_ptr() for c in copies}) == len(copies)
        for copy_, source in zip(copies, [module[0].weight] * 3 + [module[1].running_mean] * 3):
            assert copy_._base is None and copy_.stride() == source.stride() and copy_._version == 0
            torch.testing.assert_close(copy_, source.detach(), rtol=0, atol=0)
        with torch.no_grad():
            replicas[1][0].weight.add_(1)
        assert replicas[2][0].weight._version == 0 and torch.equal(replicas[2][0].weight, module[0].weight)


def test_frozen_parameters_copies_are_not_differentiable():
    """Copies of a parameter that needs no grad are marked non-differentiable (Broadcast.forward):
    they don't require grad, and the parameter's .grad stays None."""
    torch.manual_seed(2)
    module, x = nn.Sequential(nn.Linear(5, 4), nn.Linear(4, 2)), torch.randn(9, 5)
    module[0].requires_grad_(False)
    reference = copy.deepcopy(module)
    replicas = replicate(module, [0, 1])
    assert not any(r[0].weight.requires_grad for r in replicas) and all(r[1].weight.requires_grad for r in replicas)
    dp(module, 3)(x).sum().backward()
    reference(x).sum().backward()
    assert module[0].weight.grad is None and module[0].bias.grad is None
    assert_grads_equal(module, reference)


def test_all_frozen_makes_no_node():
    """When no parameter requires grad, Broadcast records nothing: no node, output without grad_fn."""
    module = TwoHeads().requires_grad_(False)
    out = dp(module, 3)(torch.randn(9, 5))
    assert out.grad_fn is None


def test_double_backward_through_the_reduce():
    """ReduceAddCoalesced.backward is a Broadcast, so a gradient penalty differentiates through it."""
    torch.manual_seed(3)
    module, x = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 2)), torch.randn(10, 5)
    reference = copy.deepcopy(module)

    def penalty(model, params):
        grads = torch.autograd.grad(model(x).pow(2).sum(), params, create_graph=True)
        return sum(g.pow(2).sum() for g in grads)

    penalty(dp(module, 3), list(module.parameters())).backward()
    penalty(reference, list(reference.parameters())).backward()
    assert_grads_equal(module, reference)


# ---------------------------------------------------------------- sparse gradients

class Bag(nn.Module):
    """A sparse Embedding, averaged per row, then a Linear."""

    def __init__(self):
        super().__init__()
        self.embedding, self.linear = nn.Embedding(10, 5, sparse=True), nn.Linear(5, 2)

    def forward(self, idx):
        return self.linear(self.embedding(idx).mean(1))


@pytest.mark.parametrize("k", [2, 3])
def test_sparse_gradients_sum_like_a_single_device(k):
    """Every copy's Embedding gradient is sparse, so comm.reduce_add_coalesced adds them as sparse
    tensors: the module's gradient is sparse and equals a single-device run's."""
    torch.manual_seed(k)
    module, idx = Bag(), torch.randint(0, 10, (9, 4))
    reference = copy.deepcopy(module)
    dp(module, k)(idx).pow(2).sum().backward()
    reference(idx).pow(2).sum().backward()
    grad, grad_ref = module.embedding.weight.grad, reference.embedding.weight.grad
    assert grad.is_sparse and grad_ref.is_sparse
    torch.testing.assert_close(grad.coalesce().to_dense(), grad_ref.coalesce().to_dense())
    torch.testing.assert_close(module.linear.weight.grad, reference.linear.weight.grad)


@pytest.mark.parametrize("k", [2, 3])
def test_sparse_embedding_trains_like_a_single_device(k):
    """SGD steps on the sparse gradients move the weights as on one device."""
    torch.manual_seed(20 + k)
    module = Bag()
    reference = copy.deepcopy(module)
    opt, opt_ref = torch.optim.SGD(module.parameters(), lr=0.5), torch.optim.SGD(reference.parameters(), lr=0.5)
    model = dp(module, k)
    for _ in range(5):
        idx = torch.randint(0, 10, (12, 3))
        for m, o in ((model, opt), (reference, opt_ref)):
            o.zero_grad()
            m(idx).pow(2).mean().backward()
            o.step()
    for (name, p), p_ref in zip(module.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p, p_ref, msg=name)


class EmbedOnDeviceZero(Bag):
    """Bag whose Embedding only the replica on device 0 uses; the others look up nothing."""

    def forward(self, idx):
        if current_device() == 0:
            return super().forward(idx)
        return self.linear(torch.zeros(len(idx), 5))


def test_sparse_and_zero_copies_sum_to_a_dense_gradient():
    """A copy that got no gradient counts as dense zeros, so not all copies are sparse and
    reduce_add_coalesced makes them dense: the gradient is dense and equals the plain one."""
    torch.manual_seed(4)
    module, idx = EmbedOnDeviceZero(), torch.randint(0, 10, (9, 4))
    reference = copy.deepcopy(module)
    dp(module, 3)(idx).pow(2).sum().backward()
    rows = [len(c) for c in idx.chunk(3)]
    out = torch.cat([Bag.forward(reference, idx[: rows[0]]), reference.linear(torch.zeros(sum(rows[1:]), 5))])
    out.pow(2).sum().backward()
    grad = module.embedding.weight.grad
    assert grad.layout == torch.strided
    torch.testing.assert_close(grad, reference.embedding.weight.grad.to_dense())
