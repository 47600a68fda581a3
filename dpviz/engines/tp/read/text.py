"""What a tensor-parallel run's key figures, explanation, log and Memory note say, from its trace: its ranks, the
slices each holds (facts["held"]), the all-reduces of each cut module in forward and backward (the spans, `group`
the module's index in facts["cut_modules"]) and their bytes (facts["moved"]). No torch.

    key_figures_tp(trace); summary_rows_tp(trace); explain_tp(trace); tutorial_log_tp(trace); memory_why_tp(...)
"""
from __future__ import annotations

from collections import Counter

from dpviz.analysis.wording import human_bytes, plural
from dpviz.engines.ddp.read import explain as ddp
from dpviz.engines.ddp.read.one_step import moved_at
from dpviz.engines.ddp.read.summary import key_figures_ddp, summary_rows_ddp
from dpviz.engines.ddp.read.words import describe_ranks
from dpviz.figures.memory_lead import fullest_lead
from dpviz.trace import Trace
from dpviz.figures.trace_words import time_sharing, where_ranks_ran

PHASES = ("allreduce_forward", "allreduce_backward")
# What the page teaches of every tensor-parallel run, in its words.
LESSON = ("TP's all-reduces sit on the critical path of every layer: the next layer cannot start until the sum is "
          "back, and nothing else overlaps them, which is why tensor parallelism stays inside a node (NVLink), while "
          "data parallelism's gradient all-reduce overlaps the backward and crosses nodes")
_DDP_ONLY = ("bucket", "all-reduce", "no_sync", "per rank", "sampler", "padding", "again")


def _held(trace: Trace) -> list[dict] | None:
    held = trace.facts.get("held")
    return held if held and None not in held else None


def modules(trace: Trace) -> list[dict]:
    return next((rank for rank in trace.facts.get("cut_modules") or [] if rank), [])


def per_step(trace: Trace) -> Counter:
    """Rank 0's all-reduces in its first step, by phase."""
    first = trace.batches[0].index if trace.batches else 0
    return Counter(s.phase for s in trace.spans_of(first) if s.lane == 0 and s.phase in PHASES)


def _cut(trace: Trace) -> str:
    """'2 column-wise and 1 row-wise Linears'."""
    styles = Counter(m["style"] for m in modules(trace))
    return " and ".join(f"{styles[s]:,} {words}" for s, words in (("colwise", "column-wise"), ("rowwise", "row-wise"))
                        if styles[s]) + " Linears" if styles else "its Linears"


def key_figures_tp(trace: Trace) -> dict[str, str]:
    figures = {k: v for k, v in key_figures_ddp(trace).items() if not any(w in k for w in _DDP_ONLY)}
    counts = per_step(trace)
    figures["all-reduces per step"] = f"{counts['allreduce_forward']:,} forward, {counts['allreduce_backward']:,} backward"
    held = _held(trace)
    if held is not None:
        figures["parameters held per rank"] = f"{held[0]['parameters']['elements']:,}"
    return figures


def summary_rows_tp(trace: Trace) -> list[tuple[str, str]]:
    rows = [(k, v) for k, v in summary_rows_ddp(trace) if not any(w in k for w in _DDP_ONLY)]
    counts = per_step(trace)
    extra = [("cut modules", f"{len(modules(trace)):,}: {_cut(trace)}"),
             ("all-reduces per rank per step", f"{counts['allreduce_forward']:,} in forward (row-wise outputs), "
                                               f"{counts['allreduce_backward']:,} in backward (column-wise inputs)")]
    held = _held(trace)
    if held is not None:
        extra.append(("held per rank", f"{held[0]['parameters']['elements']:,} parameter elements on rank 0: its "
                                       "slices and the whole parts"))
    return rows[:5] + extra + rows[5:]


def _ranks(trace: Trace) -> str:
    k = len(trace.lanes)
    where = where_ranks_ran(trace)
    text = (f"**Processes, each with a slice of every layer.** {trace.spec.label} (torch's parallelize_module with "
            f"ColwiseParallel and RowwiseParallel on a DeviceMesh) ran {plural(k, 'rank')}: "
            f"{plural(k, 'Python process')} {where}. "
            f"Every rank reads the same rows, the whole batch, and holds 1/{k} of each cut Linear: a column-wise one "
            f"its output features (whole attention heads for q, k and v), a row-wise one its input features.")
    return text + time_sharing(trace)


def _all_reduces(trace: Trace) -> str | None:
    counts = per_step(trace)
    if not counts:
        return None
    first = trace.batches[0].index
    moved = moved_at(trace, first)
    size = lambda key: human_bytes(moved.get(key, {}).get(0, 0))
    text = (f"**All-reduces inside every layer.** Per step each rank ran {plural(counts['allreduce_forward'], 'all-reduce')} "
            f"in forward ({size('all-reduce (forward)')} handed in on rank 0): each row-wise Linear's partial "
            "outputs summed (Megatron's g)")
    if trace.config.train:
        if counts["allreduce_backward"]:
            text += (f", and {counts['allreduce_backward']:,} in backward ({size('all-reduce (backward)')}): the "
                     "gradient of each column-wise input summed (Megatron's f)")
        else:
            text += (", and none in backward: the first column-wise Linear's input is the data, which needs no "
                     "gradient, so there is nothing to sum (Megatron's f runs only where an input needs one)")
    return text + f". Each is the size of the activations, not of the parameters. {LESSON}."


def _slices(trace: Trace) -> str | None:
    held = _held(trace)
    if held is None:
        return None
    first = held[0]
    return (f"**Slices and whole parts.** At the end rank 0 held {first['parameters']['elements']:,} parameter "
            f"elements ({human_bytes(first['parameters']['bytes'])}), with gradients of as many and optimizer state of "
            f"{first['optimizer state']['elements']:,}: 1/{len(held)} of each cut Linear, and the norms, embeddings and "
            "row-wise biases whole, as every rank holds them.")


def explain_tp(trace: Trace) -> list[str]:
    """Short markdown paragraphs explaining what this tensor-parallel run did, with its own numbers."""
    paragraphs = [_ranks(trace), ddp._failure(trace), *ddp._warnings(trace), _slices(trace), _all_reduces(trace)]
    return [p for p in paragraphs if p]


def tp_header(trace: Trace) -> str:
    """How many ranks, that they are processes (and on what), and that each reads the whole batch."""
    ranks = len(trace.lanes)
    where = "one process per GPU, NCCL" if trace.backend == "cuda" else f"{ranks} processes on the CPU, gloo"
    return (f"Let's use {plural(ranks, 'rank')}! ({where}; every rank loads the whole batch of "
            f"{plural(trace.config.batch_size, 'row')} and holds 1/{ranks} of each cut Linear)")


def tutorial_log_tp(trace: Trace) -> str:
    """A line per step (its rows, what the ranks all-reduced) and each rank's line, as DDP's log prints them."""
    from dpviz.analysis.batch_facts import batches_planned
    from dpviz.analysis.wording import numbered
    from dpviz.engines.ddp.read.log import step_lines

    lines = [tp_header(trace)]
    for batch in trace.batches:
        ranks_lines = step_lines(trace, batch.index, 0)[1:]
        phases = Counter(s.phase for s in trace.spans_of(batch.index) if s.lane == 0 and s.phase in PHASES)
        text = f"{numbered(batch.index, batches_planned(trace), 'Step')}: {plural(batch.rows, 'row')} on every rank"
        if trace.failure is not None and trace.failure.batch == batch.index:
            text += ", and it failed:"
        else:
            text += f"; all-reduced {plural(phases['allreduce_forward'], 'activation')} in forward"
            if trace.config.train:
                text += f", {plural(phases['allreduce_backward'], 'gradient')} in backward"
        lines += [text, *ranks_lines]
    return "\n".join(lines) + "\n"


def describe_ranks_tp(trace: Trace, here_text: str) -> str:
    """The lanes: real processes, one per rank, each holding a slice of every cut layer."""
    return describe_ranks(trace, here_text, "torch.distributed.tensor.parallel", "holding a slice of every cut layer")


def memory_why_tp(trace: Trace, table, unit) -> str:
    """How much the ranks hold at their fullest, then what each holds: its slices and the whole parts."""
    k = len(trace.lanes)
    return (fullest_lead(trace, table, unit) + f"<br>Each rank holds 1/{k} of each cut Linear (and its gradient and "
            "optimizer state),<br>the norms, embeddings and row-wise biases whole; activations are split inside the cut "
            "layers<br>and whole between them (each rank computes the same sums).")
