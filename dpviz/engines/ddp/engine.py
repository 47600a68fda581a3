"""The DistributedDataParallel engine: the real DDP over a real process group, one process per rank."""
from __future__ import annotations

import dataclasses
from typing import Any

from dpviz.config import ConfigError, RunConfig
from dpviz.trace import Trace
from dpviz.engines.base import Progress
from dpviz.engines.ddp.vocabulary import VOCABULARY


class DistributedEngine:
    """DistributedDataParallel on `gpus` ranks: NCCL with one process per GPU, or gloo on the CPU."""

    name = "ddp"
    vocabulary = VOCABULARY

    def resolve(self, config: RunConfig, available: int | None = None) -> RunConfig:
        """"cuda" (NCCL, one process per GPU) when asked for or when `auto` finds a GPU per rank, else
        "cpu" (gloo): the ranks are real processes either way, nothing is simulated."""
        if available is None:
            from dpviz.engines.run import cuda_device_count

            available = cuda_device_count()
        if config.backend == "cuda":
            if available < config.gpus:
                raise ConfigError(
                    f"backend cuda runs one process per GPU, so {config.gpus} rank{'s' if config.gpus > 1 else ''} "
                    f"need{'s' if config.gpus == 1 else ''} {config.gpus} CUDA device{'s' if config.gpus > 1 else ''}, "
                    f"but this machine has {available}; use backend cpu (gloo) or fewer ranks."
                )
            return dataclasses.replace(config, backend="cuda")
        if config.backend == "auto" and available >= config.gpus >= 2:
            return dataclasses.replace(config, backend="cuda")
        return dataclasses.replace(config, backend="cpu")

    def record(self, config: RunConfig, progress: Progress | None = None, workload: Any = None) -> Trace:
        """Run `config` (or `workload`, the user's own module: its ranks rebuild it, and rank 0's parameters and
        buffers after a training run are loaded back into it)."""
        import torch

        from dpviz.engines import ENGINES
        from dpviz.engines.run import cuda_device_count
        from dpviz.engines.ranks.launch import launch

        to_trace = ENGINES[config.engine].part("rank_program").merge  # the engine's own: DDP's, or a pipeline's

        backend = self.resolve(config).backend
        packed = workload.pack() if workload is not None else None
        launched = launch(config, progress, cuda=backend == "cuda", workload=packed,
                          keep_parameters=workload is not None and config.train)
        trace = to_trace(config, launched, backend=backend, torch_version=torch.__version__,
                         machine_gpus=cuda_device_count())
        if workload is not None:
            # Rank 0's parameters (every rank's are equal under DDP) and buffers (rank 0's own, as DDP broadcasts); a
            # pipeline's stages each hold their own layers, by the model's names: together, the whole model.
            ranks = launched["ranks"] if trace.failure is None else []
            trained = {name: value for rank in reversed(ranks) for name, value in (rank.get("parameters") or {}).items()}
            buffers = {name: value for rank in reversed(ranks) for name, value in (rank.get("buffers") or {}).items()}
            if trained:
                with torch.no_grad():
                    for name, parameter in workload.model.named_parameters():
                        parameter.copy_(torch.from_numpy(trained[name]))
                    for name, buffer in workload.model.named_buffers():
                        if name in buffers:
                            buffer.copy_(torch.from_numpy(buffers[name]))
            trace = dataclasses.replace(trace, facts={**trace.facts, **workload.facts()})
        return trace

    def check(self, trace: Trace) -> None:
        from dpviz.engines.ddp.check import check_trace

        check_trace(trace)


ENGINE = DistributedEngine()
