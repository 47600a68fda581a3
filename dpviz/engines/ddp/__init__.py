"""The DistributedDataParallel engine: the real DDP, one process per rank (gloo on CPU, NCCL on GPUs)."""
