"""The lines the tutorial prints, rebuilt from a trace in the tutorial's exact format.

A DistributedDataParallel trace gets the same log in the tutorial's spirit: each step opens with what it
held and what crossed between the ranks ("Step 1 of 4: 32 rows on 4 ranks, ..."), then each rank prints
the sizes its forward saw ("rank 2: input size torch.Size([8, 5]) output size torch.Size([8, 2])"), in
the order the ranks finished.
"""
from __future__ import annotations

from dpviz.catalogue import MODEL_SPECS
from dpviz.echo import cut
from dpviz.trace import Trace
from dpviz.analysis.wording import numbered, plural


def _size(shape: list[int] | None) -> str:
    return f"torch.Size([{', '.join(str(n) for n in shape or [])}])"


def header(trace: Trace) -> str | None:
    """The log's first line, in its engine's words; None when it prints none."""
    return trace.spec.part("log_header")(trace)


def header_dp(trace: Trace) -> str | None:
    """The tutorial's "Let's use N GPUs!" line; it prints none for a single device."""
    if trace.config.gpus < 2:
        return None
    line = f"Let's use {trace.config.gpus} GPUs!"
    return line + " (simulated: CPU threads stand in for the GPUs)" if trace.simulated else line


def batch_lines(trace: Trace, batch: int) -> list[str]:
    """One batch: each replica's line in the order the replicas finished, the warnings it raised
    first (as Python shows a warning once), then the outside line, or the error that ended the run."""
    # A replica that failed printed nothing: its forward never got to the print.
    finished = [s for s in trace.replicas(batch) if s.order is not None]
    replicas = sorted(finished, key=lambda s: s.order)
    lines = [
        f"\tIn Model: input size {_size(s.input_shape)} output size {_size(s.output_shape)}" for s in replicas
    ]
    lines += _warnings_and_failure(trace, batch)
    if trace.failure is not None and trace.failure.batch == batch:
        return lines
    b = trace.batches[batch]
    lines.append(f"Outside: input size {_size(b.input_shape)} output_size {_size(b.output_shape)}")
    return lines


def _warnings_and_failure(trace: Trace, batch: int) -> list[str]:
    lines = [f"{w.category}: {w.message}" for w in trace.warnings if w.batch == batch]
    failure = trace.failure
    if failure is not None and failure.batch == batch:
        lines += ["Traceback (most recent call last):", "  ...", f"{failure.type}: {failure.message}"]
    return lines


def ddp_header(trace: Trace) -> str:
    """How many ranks, that they are processes (and on what), and how many rows each loads a step."""
    from dpviz.analysis import tables_ddp  # here: it imports pandas, which a DataParallel log never needs

    config, ranks = trace.config, len(trace.lanes)
    where = "one process per GPU, NCCL" if trace.backend == "cuda" else \
        f"{'a process' if ranks == 1 else f'{ranks} processes'} on the CPU, gloo"
    per_rank = tables_ddp.per_rank_batch(trace) or -(-config.batch_size // max(1, ranks))
    if config.batch_per_process:
        rows = (f"each rank loads batch_size = {per_rank} rows per step (DDP's own meaning: per process), "
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
    ranks_lines = [f"{_rank_name(names.get(s.lane), s.lane)}: input size {_size(s.input_shape)} "
                   f"output size {_size(s.output_shape)}" for s in forwards]
    ranks_lines += _warnings_and_failure(trace, step)
    batch = trace.batches[step]
    ranks = len({s.lane for s in trace.spans_of(step, "forward") if s.lane is not None}) or len(trace.lanes)
    if repeated is None:
        from dpviz.analysis import tables_ddp

        repeats = tables_ddp.repeats_per_step(trace)
        repeated = repeats[step] if step < len(repeats) else 0
    total = max(trace.config.num_batches, len(trace.batches))  # a failed run stops short of its plan
    text = f"{numbered(step, total, 'Step')}: {plural(batch.rows, 'row')} on {plural(ranks, 'rank')}"
    text += f" ({repeated} repeated by the sampler's padding)" if repeated else ""
    if failed:
        return [text + ", and it failed:"] + ranks_lines
    text += ", each rank keeps its own output (no gather)"
    if trace.config.train:
        buckets = {s.bucket for s in trace.spans_of(step, "allreduce")}
        accumulate, last = trace.config.accumulate, trace.config.num_batches - 1
        if buckets:
            text += f"; gradients averaged over the ranks in {plural(len(buckets), 'bucket')} all-reduced"
        elif (step + 1) % accumulate and step != last:
            until = min(last, step - step % accumulate + accumulate - 1)
            text += f"; no all-reduce: under no_sync the gradients add up until step {until + 1:,}"
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


def tutorial_log(trace: Trace) -> str:
    """The whole printed output of the run, ending with a newline, as its engine prints it."""
    return trace.spec.part("log")(trace)


def tutorial_log_dp(trace: Trace) -> str:
    """What the tutorial prints: a line per replica and one outside, batch by batch."""
    first = header_dp(trace)
    lines = [first] if first else []
    for batch in trace.batches:
        lines.extend(batch_lines(trace, batch.index))
    return "\n".join(lines) + "\n"


def tutorial_log_ddp(trace: Trace) -> str:
    """Each rank's line and each step's, step by step."""
    from dpviz.analysis import tables_ddp

    lines = [ddp_header(trace)]
    repeats = tables_ddp.repeats_per_step(trace)  # once for the run, not once a step
    for batch in trace.batches:
        lines.extend(step_lines(trace, batch.index, repeats[batch.index] if batch.index < len(repeats) else 0))
    return "\n".join(lines) + "\n"
