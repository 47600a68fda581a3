"""DDP's sentences about a run: its ranks, its figures' footnote, its report's heading, the command line's last line."""
from __future__ import annotations



from dpviz.catalogue import MODEL_SPECS
from dpviz.trace import Trace
from dpviz.analysis.wording import DEVICE_NAME_LIMIT, counted, plural
from dpviz.config import RunConfig
from dpviz.echo import markdown_text
from dpviz.analysis.failure_words import failure_text
import sys


def ddp_heading(trace: Trace) -> str:
    """Ranks are processes; batch_size is the global batch (or each process's, as DDP code means it)."""
    config, vocabulary = trace.config, trace.vocabulary
    batch = (f"a batch of {config.batch_size:,} per process" if config.batch_per_process
             else f"a global batch of {config.batch_size:,}")
    return (f"{trace.spec.label} run: {config.data_size:,} rows, {batch}, "
            f"on {plural(config.gpus, vocabulary.lane_noun)} (one process each), {MODEL_SPECS[config.model].label}")


def ddp_note(trace: Trace) -> str:
    """'real processes: 4 ranks on the CPU (gloo)': DDP's lanes are processes, never called GPUs on a CPU."""
    ranks = plural(len(trace.lanes), trace.vocabulary.lane_noun)
    if trace.backend == "cuda":
        return f"real processes: {ranks}, one GPU each (NCCL)"
    return f"real processes: {ranks} on the CPU (gloo), no GPU"


def describe_ranks(trace: Trace, here_text: str, ran: str | None = None, holding: str = "") -> str:
    """DDP's lanes: real processes, one per rank; on the CPU they are never called GPUs. An engine on DDP's processes
    names what ran (`ran`, torch's words) and what each rank holds ("holding a shard of every parameter")."""
    ranks = plural(len(trace.lanes), trace.vocabulary.lane_noun)
    ran = ran or _torch_name(trace)
    if trace.backend == "cuda":
        names = ", ".join(markdown_text(lane.name, DEVICE_NAME_LIMIT) for lane in trace.lanes)
        return (f"Real processes on real GPUs: {ran} ran {ranks}, one process per GPU"
                f"{', each ' + holding if holding else ''}, over NCCL: {names} ({here_text}).")
    return (f"Real processes, no GPU: {ran} ran {ranks}, each its own process on the CPU"
            f"{' ' + holding if holding else ''}, talking over gloo ({here_text}).")


def _torch_name(trace: Trace) -> str:
    """What ran, in torch's words: 'torch.nn.parallel.DistributedDataParallel', or an engine's own ('ZeRO-1
    (ZeroRedundancyOptimizer over DDP)') for one that runs on DDP's processes."""
    spec = trace.spec
    return f"torch.nn.parallel.{spec.runs}" if spec.runs == spec.label else f"{spec.label} ({spec.runs})"


def ddp_outcome(trace: Trace, config: RunConfig, ranked: bool) -> int:
    """The last line on stderr of a run on DDP's processes (DDP's, ZeRO-1's, FSDP's, in its own engine's name), and the
    exit status: ranks are processes, never called GPUs unless each has one."""
    ranks = len(trace.lanes)
    if trace.failure is not None:
        print(f"dpviz: {trace.spec.label} failed in {trace.spec.unit} {counted(trace.failure.batch)} of {config.num_batches} on "
              f"{plural(ranks, trace.vocabulary.lane_noun)}: {failure_text(trace)}", file=sys.stderr)
        return 1
    if trace.backend == "cuda":
        where = "one process per GPU, NCCL"
    else:
        where = f"{'a process' if ranks == 1 else 'processes'} on the CPU, gloo"
    where += ", under torchrun" if ranked else ""
    lanes = plural(ranks, trace.vocabulary.lane_noun)  # the engine's own word: ranks
    print(f"dpviz: {plural(len(trace.batches), trace.spec.unit)} on {lanes} ({where}) in {trace.duration:.3f} s.", file=sys.stderr)
    return 0
