"""What an FSDP run's key figures, explanation and log say, from its trace: DDP's where the two agree (processes,
DistributedSampler's rows, batch size per rank, failures), FSDP's own where they differ (shards instead of
copies, a gather and a reduce-scatter per sharded module instead of bucket all-reduces).

    key_figures_fsdp(trace); summary_rows_fsdp(trace); explain_fsdp(trace); tutorial_log_fsdp(trace)

Every number comes from the trace: what each rank held (facts["held"], counted from its own tensors) and the
spans of each sharded module (`group` is the module's index). No torch.
"""
from __future__ import annotations

from collections import Counter

from dpviz.engines.ddp.read import explain as ddp
from dpviz.engines.ddp.read.summary import key_figures_ddp, summary_rows_ddp
from dpviz.engines.ddp.read.words import describe_ranks
from dpviz.analysis.wording import DEVICE_NAME_LIMIT, human_bytes, plural
from dpviz.echo import code_span
from dpviz.engines.fsdp.read import mesh_text as mesh
from dpviz.trace import Trace
from dpviz.figures.trace_words import time_sharing, where_ranks_ran

COLLECTIVES = ("gather", "gather_backward", "reduce_scatter")
_DDP_ONLY_ROWS = {"gradient buckets", "bucket all-reduces", "all-reduce beside backward"}


def _held(trace: Trace) -> list[dict] | None:
    held = trace.facts.get("held")
    return held if held and None not in held else None


def modules(trace: Trace) -> int:
    """How many sharded modules the spans name (the root counts when it holds parameters of its own)."""
    return len({s.group for s in trace.spans if s.group is not None})


def collectives_per_step(trace: Trace) -> Counter:
    """Per phase, spans of one rank in one full step: (phase) -> count, from rank 0's first step."""
    return Counter(s.phase for s in trace.spans_of(0) if s.lane == 0 and s.phase in COLLECTIVES)


def shares(trace: Trace) -> str | None:
    """'553 of 1,106 parameter elements on every rank (1/2)', or the range when shards differ."""
    held = _held(trace)
    if held is None:
        return None
    mine = [rank["parameters"]["elements"] for rank in held]
    model = sum(mine)
    each = f"{mine[0]:,}" if len(set(mine)) == 1 else f"{min(mine):,} to {max(mine):,}"
    return f"{each} of {model:,} parameter elements {'on every rank' if len(set(mine)) == 1 else 'per rank'} (1/{len(mine)})"


def key_figures_fsdp(trace: Trace) -> dict[str, str]:
    figures = {k: v for k, v in key_figures_ddp(trace).items() if "bucket" not in k and "all-reduce" not in k
               and "no_sync" not in k}
    if modules(trace):
        figures["sharded modules"] = f"{modules(trace):,}"
    held = _held(trace)
    if held is not None and mesh.on_mesh(trace):
        dp, tp = mesh.mesh_degrees(trace)
        figures["mesh"] = f"{dp} {mesh.DP_SHARD} × {tp} {mesh.TP}"
        most, again = mesh.data_counts(trace)
        per_rank = max((s.rows for s in trace.spans if s.phase == "forward"), default=0)
        figures.update({"rows per rank per step": f"{per_rank:,} (global {most:,})",
                        "rows loaded again": f"{again:,} (padding)" if again else "none"})
        figures["parameters held per rank"] = (f"{held[0]['parameters']['elements']:,} on rank 0: 1/{dp * tp} of what "
                                               f"tensor parallelism splits, 1/{dp} of the rest")
    elif held is not None:
        figures["parameters held per rank"] = f"1/{len(held)}: {held[0]['parameters']['elements']:,}"
    return figures


def summary_rows_fsdp(trace: Trace) -> list[tuple[str, str]]:
    rows = [(k, v) for k, v in summary_rows_ddp(trace) if k not in _DDP_ONLY_ROWS]
    extra = []
    if mesh.on_mesh(trace):
        fixed = mesh.data_rows(trace)
        rows = [(k, fixed.get(k, v)) for k, v in rows]
        dp, tp = mesh.mesh_degrees(trace)
        extra.append(("mesh", f"{dp} {mesh.DP_SHARD} × {tp} {mesh.TP} = {plural(len(trace.lanes), 'rank')}: "
                              f"{mesh.groups_words(trace)}"))
    if modules(trace):
        counts = collectives_per_step(trace)
        again = ", again in backward," if counts["gather_backward"] else ", kept whole for backward"
        extra.append(("sharded modules", f"{modules(trace):,}, each all-gathered before its forward"
                      + (f"{again} and its gradients reduce-scattered" if trace.config.train else "")))
        extra.append(("collectives per rank per step", mesh.collectives_words(trace) if mesh.on_mesh(trace) else
                      ", ".join(f"{n:,} {trace.vocabulary.phase(p).label}" for p, n in counts.items())))
        if trace.config.train and trace.backend == "cpu":
            extra.append(("reduce-scatter on gloo", "gloo has none: FSDP runs an all-reduce and each rank keeps its "
                                                    "shard (NCCL reduce-scatters)"))
    held = _held(trace)
    if held is not None and mesh.on_mesh(trace):
        extra.append(("held per rank", f"{held[0]['parameters']['elements']:,} of the model's {mesh.model_elements(trace):,} "
                                       f"parameter elements on rank 0: {mesh.shares_words(trace)}; gradients of as "
                                       f"many, optimizer state {held[0]['optimizer state']['elements']:,} elements"))
    elif held is not None:
        extra.append(("held per rank", f"{shares(trace)}; gradients {held[0]['gradients']['elements']:,}, optimizer "
                                       f"state {held[0]['optimizer state']['elements']:,} elements on rank 0"))
    return rows[:5] + extra + rows[5:]


def _ranks(trace: Trace) -> str:
    k = len(trace.lanes)
    where = where_ranks_ran(trace)
    text = (f"**Processes, each with a shard of the model.** FSDP (FSDP2's fully_shard) ran {plural(k, 'rank')}: "
            f"{plural(k, 'Python process')} {where}. Unlike DDP, no rank holds the whole model: each keeps its own "
            f"rows of every parameter (dim 0, ceil(rows/{k}) a rank, the last ranks fewer: about 1/{k}), and gathers "
            "the rest only while a module runs.")
    return text + time_sharing(trace)


def _shards(trace: Trace) -> str | None:
    held = _held(trace)
    if held is None:
        return None
    first = held[0]
    text = (f"**Shards, not copies.** At the end, {shares(trace)}. Each rank also kept gradients of "
            f"{first['gradients']['elements']:,} elements, of its shard only, and optimizer state of "
            f"{first['optimizer state']['elements']:,} ({human_bytes(first['optimizer state']['bytes'])}) on rank 0")
    kind = trace.config.optimizer
    text += (": Adam's two moments of its shard." if kind == "adam" else ": SGD's momentum of its shard." if kind == "sgd"
             else ".")
    if len({rank["parameters"]["elements"] for rank in held}) > 1:  # uneven real rows, padded to the same storage
        text += (f" FSDP2 pads each parameter's rows to a multiple of {len(held)}: a rank with fewer real rows (or none) "
                 f"still allocates as many, {human_bytes(first['parameters']['bytes'])} of parameters and "
                 f"{human_bytes(first['gradients']['bytes'])} of gradients on every rank; its optimizer state follows "
                 "its real rows only.")
    return text + (f" DDP would keep all of them on every rank, {len(held)} times as much.")


def _tied(trace: Trace) -> str | None:
    """A sentence on each parameter that several modules share, and the group that shards it."""
    modules = next((rank for rank in trace.facts.get("modules") or [] if rank), [])
    found = [(name, module["name"]) for module in modules for name in module["params"] if " = " in name]
    text = " ".join(f"{code_span(name, 2 * DEVICE_NAME_LIMIT)} is one parameter: FSDP shards it once, in the group of "
                    f"{'the model itself' if not where else code_span(where, DEVICE_NAME_LIMIT)}, which gathers it for every "
                    "module that uses it (FSDP2 refuses a parameter in two groups)." for name, where in found)
    return f"**Tied parameters.** {text}" if text else None


def _gathers(trace: Trace) -> str | None:
    n = modules(trace)
    if not n:
        return None
    if not trace.config.reshard_after_forward:
        return _kept_whole(trace, n)
    text = (f"**Gathered for each module, then freed.** The model was sharded as {plural(n, 'module')}. In forward, "
            "each module's parameters are all-gathered from every rank's shard just before it runs, and freed after it "
            "(reshard), the rank keeping its shard")
    if trace.config.train:
        text += (". In backward each module is gathered again, and its gradients are reduce-scattered: summed over "
                 "the ranks, each rank keeping its own rows of them (the mean, as DDP's)")
        if trace.backend == "cpu":
            text += (". gloo has no reduce-scatter: on this CPU run FSDP all-reduces the gradients and each rank "
                     "keeps its shard, so more bytes moved than on GPUs with NCCL")
        text += (". Per step and rank that is 3 collectives per module (2 all-gathers, 1 reduce-scatter) against "
                 "DDP's all-reduce per bucket: about 1.5 times DDP's bytes for 1/W of its memory")
    return text + "."


def _kept_whole(trace: Trace, n: int) -> str:
    """reshard_after_forward=False: what the run gathered, and what it kept."""
    counts = collectives_per_step(trace)
    text = (f"**Gathered once, kept whole.** The model was sharded as {plural(n, 'module')}, with "
            "reshard_after_forward=False: each module's parameters were all-gathered before its forward and not freed "
            "after it, so at the end of forward every module is whole at once, the whole model on every rank, as DDP "
            f"holds it. Per step and rank {plural(counts['gather'], 'all-gather')} ran in forward")
    if trace.config.train:
        text += (f" and {plural(counts['gather_backward'], 'all-gather')} in backward (with the default, each module "
                 "is gathered again there): fewer bytes moved, for more memory held")
    return text + "."


def explain_fsdp(trace: Trace) -> list[str]:
    """Short markdown paragraphs explaining what this FSDP run did, with its own numbers."""
    if mesh.on_mesh(trace):  # FSDP over tensor parallelism: the mesh's ranks, rows, shares and groups
        from dpviz.engines.fsdp.read.mesh_explain import explain_mesh

        ranks, rows, holds, collectives = explain_mesh(trace)
        paragraphs = [ranks, ddp._failure(trace), *ddp._warnings(trace), rows, ddp._coverage(trace),
                      ddp._epochs(trace), holds, _tied(trace), collectives]
        return [p for p in paragraphs if p]
    paragraphs = [
        _ranks(trace),
        *ddp.run_and_data(trace),
        _shards(trace),
        _tied(trace),
        _gathers(trace),
    ]
    return [p for p in paragraphs if p]


def tutorial_log_fsdp(trace: Trace) -> str:
    """DDP's log (a line per rank and per step), each training step saying what FSDP reduced."""
    from dpviz.engines.ddp.read.log import tutorial_log_ddp

    n = modules(trace)
    words = f"; gradients reduce-scattered per sharded module ({plural(n, 'module')})"
    return tutorial_log_ddp(trace).replace("; no all-reduce ran\n", words + "\n")


def describe_ranks_fsdp(trace: Trace, here_text: str) -> str:
    """The lanes: real processes, one per rank, each holding a shard of every parameter."""
    return describe_ranks(trace, here_text, "torch.distributed.fsdp.fully_shard (FSDP2)",
                          "holding a shard of every parameter")
