"""Pipeline parallelism: torch.distributed.pipelinings stages and schedules on real processes.' > __init__.py && echo 'A pipelines readers: what its traces say and draw (no torch)."""
