"""What a ZeRO-1 run's key figures and explanation say, from its trace: DDP's where the two agree (processes,
DistributedSampler's rows, batch size per rank, buckets and their all-reduce), ZeRO-1's own where they differ (the
optimizer's state sharded by whole parameters, each rank stepping its own and broadcasting them).

    key_figures_zero1(trace); summary_rows_zero1(trace); explain_zero1(trace)

Every number comes from the trace: which parameters each rank owns and the state it holds for them (facts["held"],
counted from its own tensors), the bytes it handed the broadcasts (facts["moved"]). No torch.
"""
from __future__ import annotations

from dpviz.engines.ddp.read import explain as ddp
from dpviz.engines.ddp.read.summary import key_figures_ddp, summarize_ddp, summary_rows_ddp
from dpviz.engines.zero1.read.shards import SHOWN, Shard, broadcasts, shards, split_text, state_words
from dpviz.analysis.wording import bytes_range, counted, human_bytes, plural
from dpviz.trace import Trace
from dpviz.figures.trace_words import time_sharing, where_ranks_ran


def _ranks(trace: Trace) -> str:
    k = len(trace.lanes)
    where = where_ranks_ran(trace)
    text = (f"**Processes, each with the whole model and a share of the optimizer.** ZeRO-1 (torch's "
            f"ZeroRedundancyOptimizer over DistributedDataParallel) ran {plural(k, 'rank')}: "
            f"{plural(k, 'Python process')} {where}. As under DDP, each rank keeps its own copy of the model and "
            "backward all-reduces the gradients; unlike DDP, each rank keeps the optimizer's state only for the "
            f"parameters it owns, about 1/{k} of them, steps those, and broadcasts them to the others.")
    return text + time_sharing(trace)


def _owner(shard: Shard) -> str:
    if not shard.params:
        return f"rank {shard.rank} owns no parameter (none was left to hand out) and keeps no state"
    return (f"rank {shard.rank} owns {ddp._names(shard.params)} ({plural(shard.elements, 'element')}, "
            f"{human_bytes(shard.state_bytes)} of state)")


def _owners(found: list[Shard]) -> str:
    more = len(found) - SHOWN
    return "; ".join(_owner(s) for s in found[:SHOWN]) + (f"; and {plural(more, 'more rank')}" if more > 0 else "")


def _sharded(trace: Trace) -> str | None:
    k = len(trace.lanes)
    found = shards(trace)
    if found is None:
        if trace.config.train:
            return None  # a rank never said what it held
        return ("**No optimizer, nothing sharded.** This run is forward only: ZeroRedundancyOptimizer only comes in to "
                "train, so no rank holds optimizer state and the ranks ran as DDP's do. With training on, each rank "
                f"would keep the optimizer's state for the parameters it owns only, about 1/{k} of it.")
    total = sum(s.state_bytes for s in found)
    text = ("**The optimizer's state, sharded by whole parameters.** ZeroRedundancyOptimizer hands out whole "
            "parameters, the largest first, each to the rank that owns the fewest elements so far: "
            f"{_owners(found)}. Each rank keeps {state_words(trace)} for its own parameters only, {human_bytes(total)} "
            f"over the {k} ranks together, where DDP keeps all {human_bytes(total)} on every rank.")
    if total and len({s.state_bytes for s in found}) > 1:
        largest = max(found, key=lambda s: s.state_bytes)
        text += (f" The shares are about 1/{k} each but uneven, since a parameter is never split: rank {largest.rank} "
                 f"holds {largest.state_bytes / total:.0%} of the state, and the largest shard sets the memory saved.")
    elif total:
        text += f" Here the shares come out even: 1/{k} each."
    return text


def _stepped(trace: Trace) -> str | None:
    if shards(trace) is None:
        return None
    text = ("**Each rank steps its own parameters, then broadcasts them.** After backward every rank holds the whole "
            "averaged gradient (DDP's all-reduce), but its optimizer updates only the parameters it owns; then each "
            "owner broadcasts its updated parameters, so every rank ends the step with the same whole model, as under "
            "DDP.")
    sent = broadcasts(trace)
    if sent:
        step, calls, size = sent
        text += (f" In step {counted(step)} each rank took part in {plural(calls, 'broadcast')} of {human_bytes(size)} of "
                 "parameters in all, sending its own and receiving the others', on top of the all-reduce.")
    return text


def _memory(trace: Trace) -> str | None:
    s = summarize_ddp(trace)
    if s.peak_bytes is None or len(trace.lanes) < 2:
        return None
    how = "Computed from tensor sizes" if trace.memory_kind == "computed" else "Measured"
    peaks = bytes_range(*s.peak_bytes)
    held = "parameters and gradients" if trace.config.train else "parameters"
    text = (f"**Memory per rank.** {how}, the ranks peak {'' if peaks.startswith('between') else 'at '}{peaks}: each "
            f"holds the whole model's {held}, as a DDP rank does")
    found = shards(trace)
    if found:
        text += f", and optimizer state for the parameters it owns only ({split_text(found, human_bytes)})"
    return text + "."


def explain_zero1(trace: Trace) -> list[str]:
    """Short markdown paragraphs explaining what this ZeRO-1 run did, with its own numbers."""
    trained = shards(trace) is not None
    paragraphs = [
        _ranks(trace),
        *ddp.run_and_data(trace),
        ddp._broadcast(trace, "From then on each rank keeps its own whole copy; after each step, each owner's updated "
                              "parameters cross between the processes too (below)." if trained else None),
        ddp._buckets(trace),
        ddp._allreduce(trace),
        ddp._no_sync(trace),
        ddp._unreduced(trace),
        ddp._nothing_moved(trace, ", then each owner's updated parameters, broadcast" if trained else ""),
        _sharded(trace),
        _stepped(trace),
        _memory(trace),
    ]
    return [p for p in paragraphs if p]


def key_figures_zero1(trace: Trace) -> dict[str, str]:
    """DDP's headline figures, and the optimizer state each rank holds (its shard)."""
    figures = key_figures_ddp(trace)
    found = shards(trace)
    if found:
        states = [s.state_bytes for s in found]
        label = f"optimizer state per rank (its shard of {human_bytes(sum(states))})"
        figures[label] = human_bytes(states[0]) if len(set(states)) == 1 else \
            f"{human_bytes(min(states))}–{human_bytes(max(states))}"
    return figures


def summary_rows_zero1(trace: Trace) -> list[tuple[str, str]]:
    """DDP's rows, and what ZeRO-1 shards and broadcasts."""
    rows = summary_rows_ddp(trace)
    found = shards(trace)
    extra = []
    if found:
        each = "; ".join(f"rank {s.rank}: {plural(len(s.params), 'parameter')}, {plural(s.elements, 'element')}, "
                         f"{human_bytes(s.state_bytes)} of state" for s in found[:SHOWN])
        more = len(found) - SHOWN
        extra.append(("optimizer state", f"sharded by whole parameters (ZeroRedundancyOptimizer): {each}"
                      + (f"; and {plural(more, 'more rank')}" if more > 0 else "")
                      + f"; DDP keeps {human_bytes(sum(s.state_bytes for s in found))} on every rank"))
        sent = broadcasts(trace)
        if sent:
            step, calls, size = sent
            extra.append(("broadcast after the step", f"each owner's updated parameters: {plural(calls, 'broadcast')}, "
                                                      f"{human_bytes(size)} per rank in step {counted(step)}"))
    elif not trace.config.train:
        extra.append(("optimizer state", "none: forward only, no optimizer ran"))
    return rows[:5] + extra + rows[5:]
