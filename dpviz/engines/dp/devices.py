"""Which kind of device a DataParallel run uses: real CUDA GPUs, or simulated devices on CPU threads."""
from __future__ import annotations

from dpviz.config import ConfigError, RunConfig


def resolve_backend(config: RunConfig, available: int | None = None) -> str:
    """The kind of device a run of `config` uses: real GPUs when asked for, or when `auto` finds enough."""
    if available is None:
        from dpviz.engines.run import cuda_device_count

        available = cuda_device_count()
    if config.backend == "cuda":
        if available < config.gpus:
            raise ConfigError(
                f"backend cuda needs {config.gpus} CUDA device{'s' if config.gpus > 1 else ''} "
                f"but this machine has {available}; use backend simulated or fewer gpus."
            )
        return _cast_on_cuda(config)
    if config.backend == "auto" and available >= config.gpus >= 2:
        return _cast_on_cuda(config)
    return "simulated"


def _cast_on_cuda(config: RunConfig) -> str:
    """Real DataParallel's replicas would not compute in bfloat16: torch's parallel_apply enters autocast in each
    replica's thread with the caller's `enabled` only, and a new thread's CUDA autocast dtype is float16."""
    if config.precision == "mixed":
        raise ConfigError("precision mixed computes in bfloat16, but nn.DataParallel's replica threads enter CUDA "
                          "autocast in its default float16; use backend simulated (CPU autocast defaults to bfloat16).")
    return "cuda"
