"""Plain-language explanation of a DistributedDataParallel run, derived from its trace.

    from dpviz.engines.ddp.read.explain import explain_ddp
    for paragraph in explain_ddp(trace): print(paragraph)   # short markdown paragraphs

It answers what a DataParallel user asks next: what a rank is, what
batch_size means now, which rows each rank loads and why some twice, what crosses between the
processes (a broadcast at construction, gradients all-reduced bucket by bucket while backward runs,
averaged), and what does not (no scatter, no replicate, no gather). Every number comes from the trace;
a trace file's own words (parameter names, error messages) go in as text, cut short.
"""
from __future__ import annotations

from dpviz.catalogue import MODEL_SPECS
from dpviz.echo import MESSAGE_LIMIT, code_span
from dpviz.engines.ddp.read.summary import summarize_ddp
from dpviz.engines.ddp.read.tables import allreduces, bucket_layouts, epochs_of, rank_rows, repeated_rows, sampler_order, steps_per_epoch, unreduced_steps
from dpviz.trace import Trace
from dpviz.analysis.wording import bytes_range, counted, human_bytes, plural, sizes_text

NAME_LIMIT = 40  # characters of a parameter name from a trace file
SHOWN = 4  # names or rows listed before "and N more"


def _listed(items: list[str]) -> str:
    more = f" and {len(items) - SHOWN:,} more" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


def _ranks(trace: Trace) -> str:
    k = len(trace.lanes)
    noun = trace.vocabulary.lane_noun
    if trace.backend == "cuda":
        text = (f"**Processes, one per GPU.** {trace.spec.label} ran {plural(k, noun)}: {plural(k, 'Python process')}, "
                "each with its own copy of the model on its own GPU, talking over NCCL.")
    else:
        reduced = any(s.phase == "allreduce" for s in trace.spans)
        text = (f"**Processes, not GPUs.** {trace.spec.label} ran {plural(k, noun)}: {plural(k, 'Python process')} "
                f"on this machine's CPU, {'each with its own copy of the model, talking over gloo' if k > 1 else 'with its own model and a gloo group of one'}. No GPU was used, and "
                f"none was simulated: these are real processes{' and real all-reduces' if reduced else ''}.")
        if k > 1:
            text += (f" The {k} processes share the machine's few CPU cores, so the measured times"
                     + (", the all-reduces' above all," if reduced else "")
                     + " include each rank waiting for the others to be scheduled: they show time-sharing more "
                     "than the cost of the work" + (" or of communication." if reduced else "."))
    return text


def _batch(trace: Trace) -> str | None:
    s = summarize_ddp(trace)
    config, k = trace.config, len(trace.lanes)
    if not trace.batches:
        return None
    loader = s.loader_batch if s.loader_batch is not None else s.rank_batch
    per_process = getattr(config, "batch_per_process", False)
    if per_process:
        text = (f"**Batch size, per process.** batch_size {config.batch_size:,} went to every rank's own DataLoader as "
                f"it is, as DDP code usually writes it, so one step loads up to {k} × {loader:,} = {k * loader:,} rows"
                + (f" (here {s.global_batch:,}: that is all the data there is)" if s.global_batch < k * loader else "")
                + f": the global batch grows with the number of {trace.vocabulary.lane_noun}s.")
    else:
        want = -(-config.batch_size // k)
        text = (f"**Batch size, per {trace.vocabulary.lane_noun}.** Here batch_size {config.batch_size:,} is the global "
                f"batch, as in the DataParallel tutorial, but under {trace.spec.short} every rank runs a DataLoader of its "
                f"own, whose batch_size is per process: each rank's DataLoader was given "
                f"ceil({config.batch_size:,}/{k}) = {plural(want, 'row')}"
                + (f" (the run reports {loader:,})" if loader != want else "") + ".")
        if s.global_batch != config.batch_size:
            text += (f" So a full step loads {k} × {loader:,} = {s.global_batch:,} rows, not {config.batch_size:,}: "
                     f"{config.batch_size:,} does not divide by {k}.")
        elif k > 1:
            text += f" Together the {k} ranks load {s.global_batch:,} rows a step."
    last = trace.batches[-1].index
    rows = [rank_rows(trace, last)[r].rows for r in sorted(rank_rows(trace, last))]
    if len(trace.batches) > 1 and rows and max(rows) < s.rank_batch:
        text += f" The last step, {counted(last)}, is short: {sizes_text(rows)} rows, what is left of each rank's shard."
    return text


def _strides(trace: Trace) -> str | None:
    forwards = rank_rows(trace, 0) if trace.batches else {}
    if len(forwards) < 2 or getattr(trace.config, "uneven", False):
        return None
    ids = trace.batches[0].sample_ids
    parts = [f"rank {r}: rows {_listed([str(i) for i in ids[s.row_offset:s.row_offset + s.rows]])}"
             for r, s in sorted(forwards.items())[:3]]
    k = len(trace.lanes)
    order = (f"shuffled with seed {trace.config.seed}" if trace.config.shuffle else "in dataset order (shuffle=False)")
    more = f"; and so on for {plural(k - 3, 'more rank')}" if k > 3 else ""
    return (f"**Strided shards.** Each rank has its own DistributedSampler. It takes one list of the dataset's rows, "
            f"{order}, and deals it out in strides: rank r takes places r, r + {k}, r + {2 * k}, … In step 1 "
            f"{'; '.join(parts)}{more}. DataParallel instead cuts every batch into contiguous "
            "chunks, one per GPU. The sample map shows each step in the sampler's order, the ranks' colours taking turns.")


def _padding(trace: Trace) -> str | None:
    flags = repeated_rows(trace)
    found = []  # (step, rank, dataset row)
    for batch in trace.batches:
        forwards = rank_rows(trace, batch.index)
        for rank, position in sampler_order(trace, batch.index):
            if flags[batch.index][rank][position - forwards[rank].row_offset]:
                found.append((batch.index, rank, batch.sample_ids[position]))
    if not found:
        return None
    k, size = len(trace.lanes), trace.config.data_size
    rows = sorted({row for _, _, row in found})
    steps = sorted({step for step, _, _ in found})
    ranks = sorted({rank for _, rank, _ in found})
    per = steps_per_epoch(trace)  # once: each call works the plan out again
    epochs = sorted({step // per for step in steps})
    text = (f"**Rows loaded twice.** {size:,} rows do not divide evenly among {k} ranks, so DistributedSampler pads its "
            f"list by repeating its first rows until every rank gets as many (drop_last=False): dataset "
            f"{'row' if len(rows) == 1 else 'rows'} {_listed([str(r) for r in rows])} {'was' if len(rows) == 1 else 'were'} "
            f"loaded a second time, in {'step' if len(steps) == 1 else 'steps'} {_listed([counted(s) for s in steps])} by "
            f"{'rank' if len(ranks) == 1 else 'ranks'} {_listed([str(r) for r in ranks])}"
            + (f" (in {plural(len(epochs), 'epoch')})" if len(epochs) > 1 else "") + ". ")
    text += ("The padding keeps every rank at the same number of steps: a rank with a step more would wait in an "
             "all-reduce the others never join. The repeated rows count twice in that epoch's gradients and metrics.")
    return text


def _coverage(trace: Trace) -> str | None:
    """Rows no rank loaded (DistributedSampler's drop_last), and ranks that ran out of steps (data split by hand)."""
    size = trace.config.data_size
    seen = {i for b in trace.batches for i in b.sample_ids}
    parts = []
    missing = sorted(set(range(size)) - seen)
    if missing and trace.failure is None:
        parts.append(f"**Rows never loaded.** {plural(len(missing), 'dataset row')} ({_listed([str(r) for r in missing])}) "
                     f"{'was' if len(missing) == 1 else 'were'} never loaded: with drop_last=True DistributedSampler cuts "
                     f"its list down to a multiple of {len(trace.lanes)} ranks instead of padding it, so every epoch "
                     "leaves the same rows out unless the order is shuffled.")
    steps: dict[int, int] = {}
    for batch in trace.batches:
        for rank, span in rank_rows(trace, batch.index).items():
            if span.rows:
                steps[rank] = steps.get(rank, 0) + 1
    if len(set(steps.values())) > 1 and getattr(trace.config, "uneven", False):
        counts = ", ".join(f"rank {r} {plural(n, 'step')}" for r, n in sorted(steps.items()))
        parts.append(f"**Ranks with different numbers of steps.** The rows were split by hand, without DistributedSampler's "
                     f"padding, so the ranks ran out at different steps: {counts}. A rank still training waits in an "
                     "all-reduce that the others, gone, never join" + (" (the failure above)" if trace.failure else "")
                     + "; DDP's join() context lets the finished ranks answer those all-reduces with zeros.")
    return "\n\n".join(parts) or None


def _epochs(trace: Trace) -> str | None:
    epochs = epochs_of(trace)
    if epochs < 2 or not trace.batches:
        return None
    per = steps_per_epoch(trace)
    orders = [[i for b in trace.batches[e * per:(e + 1) * per] for i in b.sample_ids] for e in range(epochs)]
    orders = [o for o in orders if o]
    same = all(o == orders[0] for o in orders[1:])
    text = f"**{epochs} epochs.** Each epoch is {plural(per, 'step')}. "
    if same and trace.config.shuffle:
        return text + ("Every epoch loaded the very same rows on the same ranks in the same order: DistributedSampler "
                       "shuffles with seed + epoch, and without sampler.set_epoch(epoch) its epoch stays 0.")
    if same:
        return text + "Without shuffling, every epoch loads the same rows in the same order."
    return text + ("Each epoch's order differs: sampler.set_epoch(epoch) gives every epoch its own shuffle, the same "
                   "on every rank.")


def _broadcast(trace: Trace, afterwards: str | None = None) -> str | None:
    """DDP()'s broadcast; `afterwards`: what moves between the processes from then on, when more than gradients
    (ZeRO-1's updated parameters)."""
    spans = [s for s in trace.spans if s.phase == "broadcast"]
    if not spans:
        return None
    took = sorted(s.duration * 1e3 for s in spans)
    took_text = f"{took[0]:,.1f} ms" if len(took) == 1 else f"{took[0]:,.1f} to {took[-1]:,.1f} ms per rank"
    alone = "" if len(trace.lanes) > 1 else ", with no other rank to receive them"
    buffers = [s for s in trace.spans if s.phase == "buffers"]
    text = (f"**One broadcast at construction.** Before step 1, DDP() checked that every rank has the same parameters "
            f"and broadcast rank 0's parameters{' and buffers' if buffers else ''} to the others ({took_text}{alone}). ")
    text += afterwards if afterwards is not None else (
        "From then on each rank owns its copy and parameters never move between the processes"
        + (": every rank steps its own optimizer on the same averaged gradients, so the copies stay equal."
           if trace.config.train else "."))
    if buffers:
        steps = len({s.batch for s in buffers})
        text += (f" The model has buffers, so before each forward DDP also broadcast rank 0's buffers "
                 f"({plural(steps, 'step')} of {len(trace.batches):,}).")
    return text


def _names(params: list[str]) -> str:
    return _listed([code_span(p, NAME_LIMIT) for p in params])


def _buckets(trace: Trace) -> str | None:
    layouts = bucket_layouts(trace)
    if not trace.config.train or not layouts:
        return None
    first = layouts[0]
    buckets = first.get("buckets") or []
    cap = trace.config.bucket_cap_mb
    text = "**Gradient buckets.** "
    if len(buckets) == 1:
        b = buckets[0]
        text += (f"In step {counted(first['step'])} DDP had put all {plural(len(b['params']), 'parameter tensor')} "
                 f"({human_bytes(b['bytes'])}) in one bucket, in the order the model registers them, so its all-reduce "
                 "could start only once backward had made every gradient.")
    else:
        text += f"In step {counted(first['step'])} the gradients sat in {plural(len(buckets), 'bucket')}."
    rebuilds = sorted({s.batch for s in trace.spans if s.phase == "rebuild"})
    if len(layouts) > 1:
        later = layouts[1]
        listing = "; ".join(f"bucket {b['index']} {_names(b['params'])} ({human_bytes(b['bytes'])})"
                            for b in (later.get("buckets") or [])[:SHOWN])
        extra = len(later.get("buckets") or []) - SHOWN
        text += (f" During that first backward DDP noted the order in which gradients became ready, and at the start of "
                 f"step {counted(later['step'])}'s forward" + (" (the rebuild on the timeline)" if rebuilds else "")
                 + f" it rebuilt the buckets in that order, once: from step {counted(later['step'])} on, "
                 f"{plural(len(later.get('buckets') or []), 'bucket')}: {listing}" + (f" and {extra:,} more" if extra > 0 else "") + ".")
    if cap is not None:
        text += (f" bucket_cap_mb={cap:g} caps a bucket at {int(cap * 2**20):,} bytes; a bucket closes on the tensor "
                 "that crosses the cap, so it can hold more.")
    return text


def _allreduce(trace: Trace) -> str | None:
    reduces = allreduces(trace)
    if not reduces:
        return None
    s = summarize_ddp(trace)
    k = len(trace.lanes)
    text = ("**All-reduce beside backward, and a mean.** A bucket's all-reduce starts as soon as all its gradients "
            "are ready, while backward still computes the rest; backward returns once every bucket's all-reduce has "
            "finished.")
    buckets: dict[tuple[int, int], set] = {}
    for r in reduces:
        buckets.setdefault((r.step, r.rank), set())
        if r.bucket is not None:  # as pandas' nunique, an unnamed bucket is not counted
            buckets[(r.step, r.rank)].add(r.bucket)
    several = [key for key, found in sorted(buckets.items()) if len(found) > 1]
    if several:
        step, rank = several[0]
        part = sorted((r for r in reduces if (r.step, r.rank) == (step, rank)), key=lambda r: r.start)
        began = [(r.start - r.backward_start) * 1e3 for r in part]
        text += (f" In step {counted(step)} on rank {rank}, the {len(part)} buckets' all-reduces began "
                 f"{', '.join(f'{t:,.1f}' for t in began)} ms into a backward of "
                 f"{(part[0].backward_end - part[0].backward_start) * 1e3:,.1f} ms.")
    if s.allreduce_s:
        text += (f" Over the run, {s.overlap_s * 1e3:,.1f} ms of the {s.allreduce_s * 1e3:,.1f} ms of all-reduce "
                 f"(summed over the ranks; {s.overlap_s / s.allreduce_s:.0%}) ran while backward was still making "
                 "gradients; for the rest backward had made them all and only waited (the pale end of its bar on the "
                 "timeline).")
    first = min(r.step for r in reduces)
    if several and max(len(found) for (step, _), found in buckets.items() if step == first) == 1:
        text += f" In step {counted(first)}, with one bucket, nothing overlapped."
    text += (f" Each rank divides its gradients by {k} before the sum, so every rank ends the step with the mean of the "
             f"{plural(k, 'rank')}' gradients: the gradient one process would get for the union of their rows.")
    return text


def _unreduced(trace: Trace) -> str | None:
    steps = unreduced_steps(trace)
    if not steps:
        return None
    listed = _listed([counted(b) for b in steps])
    return (f"**Backward without all-reduce.** In step{'s' if len(steps) > 1 else ''} {listed} backward ran but no "
            "bucket was all-reduced: DDP all-reduces a bucket once every one of its parameters has a gradient, and a "
            "parameter forward never used got none, so its bucket never filled. Each rank kept its own gradients, "
            "not averaged; DDP notices at the next forward (find_unused_parameters=True marks such parameters "
            "ready itself).")


def _no_sync(trace: Trace) -> str | None:
    s = summarize_ddp(trace)
    accumulate = trace.config.accumulate
    if not s.no_sync:
        return None
    steps = _listed([counted(b) for b in s.no_sync])
    return (f"**no_sync: {plural(len(s.no_sync), 'step')} without all-reduce.** With accumulate {accumulate}, steps "
            f"{steps} ran forward and backward inside `ddp.no_sync()`: no bucket was all-reduced, and the gradients "
            f"added up on each rank. The next step outside no_sync all-reduced the sum of {accumulate} steps' "
            "gradients in one go (the loss is divided by the number of steps, so it is their mean).")


def _nothing_moved(trace: Trace, also: str = "") -> str:
    """No scatter, replicate or gather; what does cross: the gradients and, `also`, what else an engine sends."""
    noun = trace.vocabulary.lane_noun
    text = (f"**No scatter, no replicate, no gather.** Each {noun} loads its own rows, runs forward on its own copy of "
            f"the model and computes its own loss on its own output. Nothing is scattered from one device, the model is "
            "not copied every step (DataParallel replicates it on every batch), and no output is gathered onto device 0.")
    if trace.config.train:
        layout = bucket_layouts(trace)
        per_step = sum(b.get("bytes", 0) for b in (layout[-1].get("buckets") or [])) if layout else 0
        if per_step:
            text += (f" What crosses between the processes in a step is the gradients, {human_bytes(per_step)} "
                     f"per {noun}, all-reduced" + (", and the buffers' broadcast" if any(s.phase == "buffers" for s in trace.spans) else "")
                     + also + ".")
    else:
        text += (" This run is forward only: no loss, no backward, so no all-reduce either; DDP only adds "
                 "communication in training.")
    return text


def _memory(trace: Trace) -> str | None:
    s = summarize_ddp(trace)
    if s.peak_bytes is None or len(trace.lanes) < 2:
        return None
    low, high = s.peak_bytes
    how = "Computed from tensor sizes" if trace.memory_kind == "computed" else "Measured"
    held = {}
    for m in trace.memory:
        if m.bytes:
            held.setdefault(m.category, set()).add(m.lane)
    kinds = [k for k in trace.vocabulary.memory_names if len(held.get(k, ())) == len(trace.lanes)]
    what = f": each holds its own {', '.join(kinds)}" if kinds and trace.memory_kind == "computed" else ""
    if low == high:
        return (f"**Memory is balanced.** {how}, every rank peaks at {human_bytes(high)}{what}, so no rank carries "
                "more, unlike DataParallel's device 0, which holds the gathered output"
                + (" and the only summed gradients." if trace.config.train else "."))
    peaks = bytes_range(low, high)  # one figure when both read the same
    return f"**Memory per rank.** {how}, the ranks peak {'' if peaks.startswith('between') else 'at '}{peaks}{what}."


def _failure(trace: Trace) -> str | None:
    failure = trace.failure
    if failure is None:
        return None
    who = f"rank {failure.replica}" if failure.replica is not None else "a rank"
    text = (f"**Step {counted(failure.batch)} failed** on {who}: {code_span(failure.headline, MESSAGE_LIMIT)}. Every rank "
            "stopped with it, and the trace ends there.")
    rows = {s.rows for s in rank_rows(trace, failure.batch).values()}
    if rows == {1} and trace.config.train and MODEL_SPECS[trace.config.model].norm == "BatchNorm1d":
        text += (" In that step each rank had a single row, and a BatchNorm1d layer in training mode cannot take its "
                 "statistics over one row: per-rank batches shrink as ranks are added.")
    return text


def _warnings(trace: Trace) -> list[str]:
    return [f"**A warning** (step {counted(note.batch)}, {plural(note.count, 'time')}): "
            f"{code_span(f'{note.category}: {note.message}', MESSAGE_LIMIT)}" for note in trace.warnings]


def run_and_data(trace: Trace) -> list[str | None]:
    """The paragraphs every engine of ranks opens with after its own first one: how the run ended, its warnings, and
    how each rank's DataLoader and DistributedSampler fed it (ZeRO-1's and FSDP's are DDP's here)."""
    return [_failure(trace), *_warnings(trace), _batch(trace), _strides(trace), _padding(trace), _coverage(trace),
            _epochs(trace)]


def explain_ddp(trace: Trace) -> list[str]:
    """Short markdown paragraphs explaining what this DDP run did and why, with its own numbers."""
    paragraphs = [
        _ranks(trace),
        *run_and_data(trace),
        _broadcast(trace),
        _buckets(trace),
        _allreduce(trace),
        _no_sync(trace),
        _unreduced(trace),
        _nothing_moved(trace),
        _memory(trace),
    ]
    return [p for p in paragraphs if p]
