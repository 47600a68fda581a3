"""What a DataParallel run did and why, in short markdown paragraphs with its own numbers."""
from __future__ import annotations

from collections import Counter

from dpviz.catalogue import MODEL_SPECS
from dpviz.echo import markdown_text
from dpviz.engines.dp.read.explain_pitfalls import pitfalls
from dpviz.engines.dp.chunking import chunk_sizes
from dpviz.analysis.batch_facts import batch_spans, chunks_per_batch, memory_peaks, phase_times
from dpviz.trace import Trace
from dpviz.analysis.wording import counted, device_list, human_bytes, plural, replica_threads, sizes_text


DEVICE_NAME_LIMIT = 40  # characters of a device's name from a trace file


def _batches_text(batches: list[int]) -> str:
    if len(batches) == 1:
        return f"batch {counted(batches[0])}"
    if batches == list(range(batches[0], batches[-1] + 1)):
        return f"batches {counted(batches[0])}-{counted(batches[-1])}"
    return f"{plural(len(batches), 'batch')}"


def _devices(trace: Trace) -> str:
    k = len(trace.lanes)
    if trace.simulated:
        threads = replica_threads(trace)
        steps = ("scatter with `torch.chunk`, replicate, one thread per replica, gather" if k > 1
                 else "which for one device is a plain call of the model")
        if threads < k:
            steps = (f"scatter with `torch.chunk`, replicate, the replicas taking turns on {plural(threads, 'thread')}, "
                     f"one per CPU core, gather")
        text = (f"**Simulated GPUs.** No GPU was used: CPU threads stood in for "
                f"{device_list(list(range(k)))} and ran DataParallel's own steps ({steps}). The split and the "
                f"outputs are exactly what {plural(k, 'real GPU')} would get; the times are CPU times.")
    else:
        # Device names and the torch version are the trace file's own text.
        models = sorted({markdown_text(lane.name.split(' ', 1)[-1], DEVICE_NAME_LIMIT) for lane in trace.lanes})
        text = (f"**Real GPUs.** Recorded on {plural(k, 'CUDA device')} ({', '.join(models)}) with torch "
                f"{markdown_text(trace.torch_version, 40)}.")
    if k == 1:
        text += (" With a single device DataParallel does not split anything: every batch goes whole to "
                 "GPU 0, with no replicate and no gather.")
    return text


def _batches(trace: Trace) -> str:
    sizes = [b.rows for b in trace.batches]
    counts = Counter(sizes)
    parts = [f"{plural(n, 'batch')} of {size:,}" for size, n in sorted(counts.items(), key=lambda kv: -kv[0])]
    text = (f"**Batches.** {plural(sum(sizes), 'row')} in batches of {trace.config.batch_size:,} "
            f"make {plural(len(sizes), 'batch')}: {' and '.join(parts)}.")
    if len(sizes) > 1 and sizes[-1] < max(sizes):
        text += (f" The DataLoader keeps the short last batch (drop_last=False), so batch {counted(len(sizes) - 1)} "
                 f"has only {plural(sizes[-1], 'row')}.")
    return text


def _split(rows: int, chunks: tuple[int, ...], devices: int, where: str, many: bool) -> str:
    if len(chunks) > 1:
        lead = f"**Why {where} {'split' if many else 'splits'} {sizes_text(chunks)}.**"
    else:
        lead = f"**Why {where} {'run' if many else 'runs'} on one GPU.**"
    used = len(chunks)
    if rows == 0:
        return f"{lead} An empty batch gives every GPU an empty chunk."
    size = -(-rows // devices)
    text = (f"{lead} DataParallel cuts the batch with `torch.chunk`, which puts "
            f"ceil({rows:,}/{devices}) = {plural(size, 'row')} in every chunk")
    idle = list(range(used, devices))
    idle_text = (f"{device_list(idle)} sit{'s' if len(idle) == 1 else ''} idle, and DataParallel gives no warning."
                 if idle else "")
    if rows < devices:
        text += (f": {plural(rows, 'row')} {'makes' if rows == 1 else 'make'} only {plural(used, 'chunk')} for {plural(devices, 'GPU')}, "
                 f"and DataParallel copies the model only to as many GPUs as there are chunks. {idle_text} "
                 "Its documentation asks for batches larger than the number of GPUs.")
    elif rows % devices == 0:
        text += f", and {rows:,} rows divide evenly over the {plural(devices, 'GPU')}."
    elif used == devices:
        even = [rows // devices + (1 if i < rows % devices else 0) for i in range(devices)]
        text += f" and leaves the rest for the last GPU: {sizes_text(chunks)}, not the even {sizes_text(even)}."
    else:
        text += (f", so {rows:,} rows fill only {plural(used, 'chunk')} ({sizes_text(chunks)}) for {plural(devices, 'GPU')}. "
                 "`torch.chunk` may return fewer chunks than asked, and DataParallel copies the model only to as "
                 f"many GPUs as there are chunks: {idle_text}")
    expected = tuple(chunk_sizes(rows, devices))
    if chunks != expected:
        text += f" (The trace shows {sizes_text(chunks)}, where torch.chunk gives {sizes_text(expected)}.)"
    return text


def _splits(trace: Trace, chunks: list[tuple[int, ...]]) -> list[str]:
    devices = len(trace.lanes)
    if devices == 1:
        return []  # nothing is split; _devices says so
    by_split: dict[tuple[int, tuple[int, ...]], list[int]] = {}
    failed = trace.failure.batch if trace.failure else None
    for batch, split in zip(trace.batches, chunks):
        if batch.index == failed:  # explained with the failure: its replicas stopped part-way
            continue
        by_split.setdefault((batch.rows, split), []).append(batch.index)
    out = []
    for (rows, split), batches in by_split.items():
        many = len(batches) > 1
        where = f"{_batches_text(batches)} ({plural(rows, 'row')}{' each' if many else ''})"
        out.append(_split(rows, split, devices, where, many))
    return out


def _idle(trace: Trace, chunks: list[tuple[int, ...]]) -> str | None:
    devices = len(trace.lanes)
    idle = [(b, devices - len(c)) for b, c in enumerate(chunks) if len(c) < devices]
    if not idle:
        return None
    slots = sum(n for _, n in idle)
    text = (f"**Idle GPUs.** Over the run, {slots:,} of {len(chunks) * devices:,} GPU slots (one per GPU per batch) "
            f"got no rows, in {plural(len(idle), 'batch')}.")
    by_chunk = all(tuple(chunk_sizes(b.rows, devices)) == c for b, c in zip(trace.batches, chunks))
    if by_chunk:  # otherwise another argument, not the batch size, decided how many replicas ran
        text += (f" Batches whose size is a multiple of {devices} keep all {devices} GPUs busy; a short last batch "
                 "can be dropped with drop_last=True.")
    return text


def _device_zero(trace: Trace, chunks: list[tuple[int, ...]]) -> str | None:
    if len(trace.lanes) < 2:
        return None
    out = trace.output_device
    outputs = [b for b in trace.batches if b.output_shape]  # a failed batch has no output
    size = f" (up to {' × '.join(f'{n:,}' for n in max(outputs, key=lambda b: b.rows).output_shape)})" if outputs else ""
    firsts = [c[0] for c in chunks if c]
    training = ("and in this training run so do the loss, the sum of all replicas' gradients and the optimizer state"
                if trace.config.train else
                "and in training so would the loss, the sum of all replicas' gradients and the optimizer state")
    text = (f"**Why GPU {out} carries more.** GPU {out} is the output device: the gathered output of every batch"
            f"{size} lands there, {training}. The model lives there too and is copied to the other GPUs "
            "on every batch.")
    if out == 0 and firsts and all(f == max(c) for f, c in zip(firsts, chunks) if c):
        text += " Its own chunk is never smaller than another GPU's: `torch.chunk` fills the first chunks first."
    return text


def _backward(trace: Trace) -> str | None:
    """How the gradients come back: split like the forward, summed (not averaged) on device_ids[0]."""
    if not trace.config.train:
        return None
    first = trace.lanes[0].id
    if len(trace.lanes) == 1:
        return (f"**The way back.** With one device the loss, the backward and the optimizer step all run on GPU {first}: "
                "nothing is split and nothing is summed.")
    splits: dict[tuple[int, ...], list[int]] = {}
    failed = trace.failure.batch if trace.failure else None
    for batch in trace.batches:
        if batch.index == failed:  # it never got to its loss
            continue
        rows = tuple(s.rows for s in batch_spans(trace, batch.index, "backward"))
        splits.setdefault(rows, []).append(batch.index)
    parts = [f"{sizes_text(rows)} rows in {_batches_text(batches)}" for rows, batches in splits.items()]
    counts = Counter(len(rows) for rows in splits)
    replicas = (f"the {plural(next(iter(counts)), 'replica')}' gradients" if len(counts) == 1 else
                "the replicas' gradients (" + ", ".join(f"{len(rows)} in {_batches_text(batches)}"
                                                       for rows, batches in splits.items()) + ")")
    reduces = batch_spans(trace, 0, "reduce")
    steps = batch_spans(trace, 0, "step")
    where = f"GPU {reduces[0].lane}" if reduces else f"GPU {first}"
    if not splits:
        return None
    own_loss = MODEL_SPECS[trace.config.model].returns_loss
    loss = "mean of the gathered per-GPU losses" if own_loss else "MSE loss"
    text = (f"**The way back.** After the {loss} on GPU {trace.output_device}, the gather's backward splits the "
            f"output gradient with the forward's chunk sizes, so each GPU gets the gradient of exactly the rows it "
            f"computed: {'; '.join(parts)}. Each replica's backward makes a gradient for its own copy of every "
            f"parameter, and replicate's backward **sums** {replicas} onto {where} "
            "into the model's own `.grad`: a sum, not an average.")
    text += (" Here the loss averages the per-GPU losses, each GPU's chunk counting alike whatever its rows, so "
             "that sum is the gradient one GPU would get for the whole batch only when the chunks are equal."
             if own_loss else " Because the loss is a mean over the whole gathered batch, that sum is the gradient "
             "one GPU would get for the whole batch.")
    if steps:
        text += f" The optimizer step then runs on GPU {steps[0].lane}, where the parameters and the optimizer state live."
    if trace.simulated:
        text += (" (Simulated: the replicas' backwards ran one after another on the CPU autograd thread; real GPUs "
                 "run each device's backward on that device's own thread.)")
    return text


# How the memory paragraph names each kind of tensor, in the order it lists them.
HELD = {
    "parameters": "the parameters", "gradients": "the summed gradients", "optimizer state": "the optimizer state",
    "output and loss": "the gathered output and the loss", "batch and chunks": "the whole batch",
    "backward buffers": "the whole output gradient and its replica's gradients",
    "activations": "its replica's activations", "parameter copies": "parameter copies",
}


def _held(category: str, train: bool) -> str:
    return "the gathered output" if category == "output and loss" and not train else HELD.get(category, category)


def _memory(trace: Trace) -> str | None:
    """How much more device 0 holds than the others, and of what, from the memory samples."""
    peaks = memory_peaks(trace)
    if peaks is None or peaks[1] is None:
        return None
    mine, other = peaks
    me = f"GPU {mine.device}"
    how = ("Computed from tensor sizes" if trace.memory_kind == "computed"
           else "Measured with `torch.cuda.memory_allocated`")
    text = (f"**How much more {me} holds.** {how}, {me} peaks at {human_bytes(mine.bytes)} "
            f"after the {mine.phase} of batch {counted(mine.batch)}; no other GPU holds more than "
            f"{human_bytes(other.bytes)} (GPU {other.device}, after {other.phase})")
    text += f", so {me} needs {mine.bytes / other.bytes:.1f}× as much." if other.bytes else "."
    if trace.memory_kind != "computed":
        return text
    train = trace.config.train
    # Plain sums over the samples (a few hundred): this runs on every new run, where pandas' pivot cost 11 ms.
    held: dict[str, dict[int, int]] = {}  # category -> device -> bytes, at the peak's moment
    for m in trace.memory:
        if (m.batch, m.phase) == (mine.batch, mine.phase):
            lanes = held.setdefault(m.category, {})
            lanes[m.lane] = lanes.get(m.lane, 0) + m.bytes
    alone, more = [], []
    for category in [c for c in HELD if c in held]:
        row = held[category]
        own = row.get(mine.device, 0)
        rest = max((b for d, b in row.items() if d != mine.device), default=0)
        if own and not rest:
            alone.append(f"{_held(category, train)} ({human_bytes(own)})")
        elif own > rest:
            more.append(f"{_held(category, train)} ({human_bytes(own)}, where the others hold at most {human_bytes(rest)})")
    if alone:
        text += f" At that moment only {me} holds {_and(alone)}"
        text += f"; it also holds {_and(more)}." if more else "."
    elif more:
        text += f" At that moment {me} holds {_and(more)}."
    # What only this device keeps at some later moment: the most it held of it, and nobody else ever held it.
    mine_most: dict[str, int] = {}
    elsewhere = set()
    for m in trace.memory:
        if m.lane == mine.device:
            mine_most[m.category] = max(mine_most.get(m.category, 0), m.bytes)
        else:
            elsewhere.add(m.category)
    later = [f"{HELD[c]} ({human_bytes(mine_most[c])})" for c in ("gradients", "optimizer state")
             if c in mine_most and c not in held and c not in elsewhere]
    if later:
        text += f" Later in the batch it also keeps {_and(later)}, which no other GPU ever holds."
    return text


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _slices(trace: Trace) -> str | None:
    replicas = trace.replicas(0)
    if len(replicas) < 2:
        return None
    parts = [
        f"GPU {s.lane} row {s.row_offset}" if s.rows == 1 else f"GPU {s.lane} rows {s.row_offset}-{s.row_offset + s.rows - 1}"
        for s in replicas[:3] if s.rows
    ]
    order = ("a random draw of dataset rows, because shuffle=True" if trace.config.shuffle
             else "consecutive dataset rows, because shuffle=False")
    return (f"**Contiguous slices.** Each GPU gets one contiguous slice of its batch (in batch {counted(0)}: {', '.join(parts)}"
            f"{', …' if len(replicas) > 3 else ''}). The batch itself is {order}. (DistributedDataParallel's "
            "sampler instead deals rows out in strides, one per process.)")


def _time(trace: Trace) -> str | None:
    phases = {p: t.total_s * 1e3 for p, t in phase_times(trace).items()}
    copies = [p for p in ("scatter", "replicate", "gather") if p in phases]
    if not copies or "forward" not in phases:
        return None
    copy_ms = sum(phases[p] for p in copies)
    forward_ms = phases["forward"]
    share = ", ".join(f"{p} {phases[p]:,.2f} ms" for p in copies)
    busiest = max(copies, key=lambda p: phases[p])
    if len(trace.lanes) == 1:
        return f"**Where the time went.** The scatter took {copy_ms:,.2f} ms and the forwards {forward_ms:,.2f} ms."
    text = (f"**Where the time went.** Moving data took {copy_ms:,.2f} ms ({share}); the replicas' forwards, "
            f"running in parallel threads, added up to {forward_ms:,.2f} ms.")
    if copy_ms > forward_ms:
        text += (f" For this model, copying costs more than computing, {busiest} most of all: DataParallel "
                 "re-copies the model to every GPU on every batch, one reason it can be slower than one GPU.")
    else:
        text += " Here the forwards outweigh the copies."
    if trace.simulated:
        text += " (CPU times of the simulation; real GPUs differ.)"
    return text


def _print_order(trace: Trace) -> str | None:
    if len(trace.lanes) < 2:
        return None
    shuffled = []
    for batch in trace.batches:
        replicas = trace.replicas(batch.index)
        if any(s.order is not None and s.order != i for i, s in enumerate(replicas)):
            shuffled.append(batch.index)
    text = "**Print order.** The tutorial's `In Model` lines appear in the order the replicas finish, not in GPU order;"
    if shuffled:
        return f"{text} here that order differed from GPU order in {plural(len(shuffled), 'batch')} of {len(trace.batches):,}."
    return f"{text} here it happened to match GPU order in every batch, which is not guaranteed."


def _single_rows(trace: Trace, chunks: list[tuple[int, ...]]) -> str | None:
    hits = [(b, c.index(1)) for b, c in enumerate(chunks) if len(c) > 1 and 1 in c]
    if not hits:
        return None
    b, replica = hits[0]
    if trace.failure is not None and trace.failure.batch == b:
        return None  # the failure's own paragraph says what the one row did
    lane = trace.replicas(b)[replica].lane
    more = f" (and {plural(len(hits) - 1, 'other batch')})" if len(hits) > 1 else ""
    text = f"**One-row chunks.** Batch {counted(b)} gives GPU {lane} a single row{more}."
    if MODEL_SPECS[trace.config.model].norm == "BatchNorm2d":
        return text + (" The model's BatchNorm2d takes its statistics over every pixel of the image too, so one image "
                       "is enough; a BatchNorm1d on feature vectors would fail on it in training mode.")
    return text + (" That is harmless for this model, but a BatchNorm1d layer in training mode fails on a one-row "
                   "chunk (try the MLP).")


def explain_dp(trace: Trace) -> list[str]:
    """A DataParallel run, finding by finding."""
    chunks = chunks_per_batch(trace)
    paragraphs = [
        _devices(trace),
        *pitfalls(trace),
        _batches(trace),
        *_splits(trace, chunks),
        _idle(trace, chunks),
        _device_zero(trace, chunks),
        _memory(trace),
        _backward(trace),
        _slices(trace),
        _time(trace),
        _print_order(trace),
        _single_rows(trace, chunks),
    ]
    return [p for p in paragraphs if p]
