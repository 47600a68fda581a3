"""DistributedDataParallel's own settings: what DDP users tune and where they trip, as a run's config holds them
(RunConfig.options) and as the page's widgets, the links and the command line's flags offer them, in this order
(a trace file's too). ZeRO-1 reads the same; FSDP reads those that are not its reducer's."""
from __future__ import annotations

from dataclasses import dataclass

from dpviz.engines.spec import option


@dataclass(frozen=True)
class DdpOptions:
    bucket_cap_mb: float | None = option(
        None, "bucket_cap_mb (MiB; empty: DDP's default)",
        "DDP's gradient bucket cap. Left empty, 25 MiB with a first bucket of 1 MiB; a tiny cap such as 0.0002 splits "
        "even these small models into several buckets.",
        kind="mib", limits=(0.0001, 1024.0))  # torch takes int(mb * 2**20): 0.0001 is 104 bytes
    accumulate: int = option(
        1, "Accumulate gradients over N steps",
        "N-1 steps under no_sync() (no all-reduce), then one that all-reduces and steps. Needs Train.",
        kind="whole", limits=(1, 64))
    # DDP's pitfalls, each a setting its users meet: batch_size per process (DDP's own meaning), the sampler's
    # drop_last, several epochs with or without set_epoch, find_unused_parameters, data split by hand into uneven
    # shards (no DistributedSampler), ddp.join() for them, and the collective timeout.
    batch_per_process: bool = option(
        False, "batch_size per process",
        "On: every rank's DataLoader loads batch_size rows, as DDP code does; the global batch grows with the ranks. "
        "Off: batch_size is the global batch, as in the tutorial.")
    drop_last: bool = option(False, "DistributedSampler(drop_last=True)", "Drop the rows that do not divide evenly.")
    epochs: int = option(1, "Epochs", "Passes over the data.", kind="whole", limits=(1, 4))
    set_epoch: bool = option(True, "sampler.set_epoch(epoch)", "Off: every epoch loads the same rows in the same order.")
    find_unused: bool = option(False, "find_unused_parameters=True", "Needed when forward leaves a parameter unused.")
    uneven: bool = option(False, "Split the rows by hand (uneven shards)",
                          "No DistributedSampler: contiguous shards, so ranks may get different numbers of batches.")
    join: bool = option(False, "ddp.join() around the loop", "Ranks that run out of batches keep answering the others.")
    timeout_s: int = option(30, "Collective timeout (s)", "How long a rank waits in a step's collective before the run ends.",
                            kind="whole", limits=(2, 600))
    optimizer: str = option(
        "sgd", "Optimizer",
        "What each rank steps when training: SGD with momentum keeps one buffer per parameter, Adam two (its "
        "optimizer state is twice the parameters).",
        kind="choice", choices=("sgd", "adam"))
    precision: str = option(
        "full", "Precision",
        "full: everything in float32. mixed: forward and loss compute in bfloat16 while the parameters, gradients and "
        "the optimizer's state stay float32 (torch.autocast under DataParallel, DDP and ZeRO-1; FSDP2's "
        "MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)).",
        kind="choice", choices=("full", "mixed"))
