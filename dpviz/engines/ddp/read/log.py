"""A DDP run's log: what each rank's DataLoader gave it and what its forward saw, step by step."""
from __future__ import annotations

from dpviz.analysis.batch_facts import batches_planned
from dpviz.catalogue import MODEL_SPECS
from dpviz.echo import cut
from dpviz.trace import Trace
from dpviz.analysis.wording import counted, numbered, plural
from dpviz.exports.tutorial_log import size_text
from dpviz.exports.tutorial_log import warnings_and_failure


def ddp_header(trace: Trace) -> str:
    """How many ranks, that they are processes (and on what), and how many rows each loads a step."""
    from dpviz.engines.ddp.read import tables as tables_ddp  # here: it imports pandas, which a DataParallel log never needs

    config, ranks = trace.config, len(trace.lanes)
    where = "one process per GPU, NCCL" if trace.backend == "cuda" else \
        f"{'a process' if ranks == 1 else f'{ranks} processes'} on the CPU, gloo"
    per_rank = tables_ddp.per_rank_batch(trace) or -(-config.batch_size // max(1, ranks))
    if config.batch_per_process:
        rows = (f"each rank loads batch_size = {per_rank} rows per step (per process: every rank's own DataLoader), "
                f"a global batch of {ranks * per_rank}")
    else:
        rows = f"each rank loads ceil({config.batch_size} / {ranks}) = {plural(per_rank, 'row')} per step"
        globally = ranks * per_rank
        rows += (f", a global batch of {globally}, not batch_size {config.batch_size}" if globally != config.batch_size
                 else f", a global batch of {globally}, as batch_size says")
    return f"Let's use {plural(ranks, 'rank')}! ({where}; {rows})"


def step_lines(trace: Trace, step: int, repeated: int | None = None) -> list[str]:
    """One DDP step: first what the step held and whether its gradients were all-reduced ("Step 2 of 4:
    ..."), then each rank's line in the order the ranks' forwards finished (each rank prints from its own
    process), its warnings, or the error that ended the run. `repeated`: the step's rows that repeat
    earlier ones (the sampler's padding), computed here unless given."""
    forwards = sorted((s for s in trace.spans_of(step, "forward") if s.lane is not None),
                      key=lambda s: (s.end, s.lane))
    failed = trace.failure is not None and trace.failure.batch == step
    if failed and not MODEL_SPECS[trace.config.model].returns_loss:
        forwards = [s for s in forwards if s.output_shape]  # a rank whose forward raised printed nothing
    names = {lane.id: lane.name for lane in trace.lanes}
    ranks_lines = [f"{_rank_name(names.get(s.lane), s.lane)}: input size {size_text(s.input_shape)} "
                   f"output size {size_text(s.output_shape)}" for s in forwards]
    ranks_lines += warnings_and_failure(trace, step)
    batch = trace.batches[step]
    ranks = len({s.lane for s in trace.spans_of(step, "forward") if s.lane is not None}) or len(trace.lanes)
    if repeated is None:
        from dpviz.engines.ddp.read import tables as tables_ddp

        repeats = tables_ddp.repeats_per_step(trace)
        repeated = repeats[step] if step < len(repeats) else 0
    total = batches_planned(trace)  # a failed run stops short of its plan
    text = f"{numbered(step, total, 'Step')}: {plural(batch.rows, 'row')} on {plural(ranks, 'rank')}"
    text += f" ({repeated} repeated by the sampler's padding)" if repeated else ""
    if failed:
        return [text + ", and it failed:"] + ranks_lines
    text += ", each rank keeps its own output (no gather)"
    if trace.config.train:
        buckets = {s.group for s in trace.spans_of(step, "allreduce")}
        accumulate, last = trace.config.accumulate, trace.config.num_batches - 1
        if buckets:
            text += f"; gradients averaged over the ranks in {plural(len(buckets), 'bucket')} all-reduced"
        elif (step + 1) % accumulate and step != last:
            until = min(last, step - step % accumulate + accumulate - 1)
            text += f"; no all-reduce: under no_sync the gradients add up until step {counted(until)}"
        else:
            text += "; no all-reduce ran"
    return [text] + ranks_lines


def _rank_name(name: str | None, lane: int) -> str:
    """"rank 2"; with where it ran when the lane's name says more than its rank ("rank 1 (node 1 rank 0)",
    under torchrun). A name from a file is text: on one line, cut."""
    rank = f"rank {lane}"
    if not name or name == rank or name.startswith(rank + " ("):
        return rank
    return f"{rank} ({cut(' '.join(name.split()), 40)})"


def tutorial_log_ddp(trace: Trace) -> str:
    """Each rank's line and each step's, step by step."""
    from dpviz.engines.ddp.read import tables as tables_ddp

    lines = [ddp_header(trace)]
    repeats = tables_ddp.repeats_per_step(trace)  # once for the run, not once a step
    for batch in trace.batches:
        lines.extend(step_lines(trace, batch.index, repeats[batch.index] if batch.index < len(repeats) else 0))
    return "\n".join(lines) + "\n"
