"""Tensor parallelism: torch.distributed.tensor.parallel (ColwiseParallel, RowwiseParallel, PrepareModuleInput on a
DeviceMesh), each rank holding a slice of every cut layer and the ranks all-reducing inside every forward and
backward. See spec.py for what the rest of dpviz sees of it."""
