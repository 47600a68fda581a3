"""Plain-language paragraphs for the pitfalls a run ran into, derived from its trace.

    from dpviz.engines.dp.read.explain_pitfalls import pitfalls
    pitfalls(trace)   # markdown paragraphs: the failure and why, the warnings, lost state, the inputs

Every number and name comes from the run: which replica failed and with what rows and arguments,
the warning's own text, the model's counters after the run, what each replica was handed. A trace may
come from a file, so its own words (errors, warnings, argument names) go in as text, cut short.
"""
from __future__ import annotations

import re
from collections import defaultdict

from dpviz.echo import LIMIT, MESSAGE_LIMIT, code_span, markdown_text
from dpviz.catalogue import INPUT_SPECS
from dpviz.analysis.wording import counted, device_list, plural, sizes_text
from dpviz.trace import ArgumentSample, Trace


SHOWN = 4  # names listed in a sentence before "and N more": a file may hold thousands


def _listed(items: list[str]) -> str:
    """'a, b, c' of the first SHOWN items, and how many more there are."""
    more = f" and {len(items) - SHOWN:,} more" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


def _shape(shape: list[int]) -> str:
    return " × ".join(f"{n:,}" for n in shape) if shape else "a 0-dim tensor"



def _arguments(trace: Trace, batch: int) -> dict[int, list[ArgumentSample]]:
    by_replica: dict[int, list[ArgumentSample]] = defaultdict(list)
    for a in trace.arguments:
        if a.batch == batch:
            by_replica[a.replica].append(a)
    return dict(by_replica)


def _what(a: ArgumentSample) -> str:
    if a.kind == "tensor":
        return f"{code_span(a.path, LIMIT)} ({_shape(a.shape)})"
    container, _, inner = a.kind.partition(" of ")
    size = f" of {a.shape[0]:,}{' ' + markdown_text(inner + 's', LIMIT) if inner else ''}" if a.shape else ""
    return f"{code_span(a.path.rstrip('='), LIMIT)} (a {markdown_text(container, LIMIT)}{size})"


def _why_failed(trace: Trace) -> str | None:
    failure = trace.failure
    batch = trace.batches[failure.batch]
    forwards = trace.replicas(failure.batch)
    rows = [s.rows for s in forwards]
    gpus = len(trace.lanes)
    got = _arguments(trace, failure.batch)
    mine = got.get(failure.replica, []) if failure.replica is not None else []
    positional = set(INPUT_SPECS[trace.config.inputs].positional)
    if mine and not any(a.path.split("[")[0] in positional for a in mine):
        empty = [r for r, args in got.items() if not any(a.path.split("[")[0] in positional for a in args)]
        keywords = sorted({a.path.rstrip("=") for a in mine})
        chunks = len(got) - len(empty)
        return (f"Batch {counted(failure.batch)} has {plural(batch.rows, 'row')}, which `torch.chunk` cut into only "
                f"{plural(chunks, 'chunk')} for {plural(gpus, 'GPU')}; the keyword "
                f"{_listed([code_span(k, LIMIT) for k in keywords])} is not a tensor, so scatter copied it to all {gpus}. "
                f"`scatter_kwargs` then pads the shorter list, the positional arguments, with empty tuples: "
                f"replica{'s' if len(empty) > 1 else ''} {sizes_text(empty)} ({device_list(empty)}) "
                f"{'were' if len(empty) > 1 else 'was'} called with the keyword alone."
                + (" The earlier batches worked because each made a chunk for every GPU." if failure.batch else "")
                + f" Fix: pass the value positionally, or use batches that `torch.chunk` cuts into {gpus} chunks "
                f"(a multiple of {gpus} rows is enough) and drop a short last one (DataLoader(drop_last=True)).")
    hidden = {a.replica: a for args in got.values() for a in args if a.path == "h0"}
    if hidden and "hidden size" in failure.message:
        h0 = next(iter(hidden.values()))
        x = next((a for a in got.get(0, []) if a.path == "x"), None)
        return (f"h0 is (layers, batch, hidden) = {_shape(h0.shape)}: its batch is on dim 1, but DataParallel split "
                f"every tensor on dim {trace.dim}. Cut along its layers, h0 made {plural(len(hidden), 'piece')}, and "
                f"scatter keeps only as many replicas as its shortest list: {plural(len(got), 'replica')} for "
                f"{plural(gpus, 'GPU')}. Replica 0 got x's {plural(x.shape[trace.dim] if x and len(x.shape) > trace.dim else 0, 'row')} "
                f"with the hidden state of all {h0.shape[1] if len(h0.shape) > 1 else 0:,}, and the GRU refused. Fix: give every input the same "
                "batch dim: time first with DataParallel(dim=1) (model `gru_dim1`), or pass h0 batch first and "
                "transpose it inside forward.")
    if failure.replica is not None and failure.replica < len(rows) and rows[failure.replica] == 1 \
            and "more than 1 value per channel" in failure.message:
        lane = forwards[failure.replica].lane
        # BatchNorm's own message names the input: (1, C) for BatchNorm1d, (1, C, H, W) for BatchNorm2d.
        layer = "BatchNorm2d" if re.search(r"torch\.Size\(\[1(, \d+){3}\]\)", failure.message) else "BatchNorm1d"
        whole = (" On one GPU the whole batch would have been fine." if batch.rows > 1 else
                 " The batch itself has one row, so one GPU would fail too.")
        return (f"Batch {counted(failure.batch)} has {plural(batch.rows, 'row')}, split {sizes_text(rows)} over "
                f"{plural(gpus, 'GPU')}, so GPU {lane}'s replica got a single row, and {layer} in training mode "
                "(a module's default until `.eval()`, training or not) needs more than one value per channel to take "
                f"a batch variance.{whole} Fix: DataLoader(drop_last=True), or a batch size whose chunks never come "
                "to one row.")
    return None


def _failure(trace: Trace) -> str | None:
    failure = trace.failure
    if failure is None:
        return None
    done = len(trace.batches) - 1
    after = f"after {plural(done, 'batch')} that worked" if done else "in its first batch"
    text = (f"**The run stopped at batch {counted(failure.batch)}** of {trace.config.num_batches:,}, {after}. DataParallel "
            f"raised {code_span(failure.headline, MESSAGE_LIMIT)}; the replica's own error "
            f"was {code_span(failure.original, MESSAGE_LIMIT)}.")
    why = _why_failed(trace)
    return f"{text} {why}" if why else text


def _warnings(trace: Trace) -> list[str]:
    out = []
    losses = trace.facts.get("losses", [])
    for note in trace.warnings:
        text = (f"**A warning, {plural(note.count, 'time')}.** {code_span(f'{note.category}: {note.message}', MESSAGE_LIMIT)} "
                f"(first in batch {counted(note.batch)}).")
        if note.message.startswith("Was asked to gather") and losses:
            last = losses[-1]
            gathered, rows = last["gathered"], last["chunk_rows"]
            mean = sum(gathered) / len(gathered)
            weighted = sum(g * r for g, r in zip(gathered, rows)) / max(1, sum(rows))
            text += (f" Each replica returned a 0-dim loss, which cannot be concatenated, so gather made them a "
                     f"vector with one loss per GPU: in batch {counted(last['batch'])}, {sizes_text([round(g, 4) for g in gathered])} "
                     f"for chunks of {sizes_text(rows)} rows.")
            if len(set(rows)) > 1:
                text += (f" Its mean, {mean:.4f}, is not the whole batch's loss, {last['whole']:.4f}: the mean weighs "
                         f"every chunk alike, whatever its rows. Weighting by rows gives {weighted:.4f}.")
            else:
                text += f" With equal chunks its mean, {mean:.4f}, matches the whole batch's loss, {last['whole']:.4f}."
            text += " Fix: return per-row outputs (or losses) from forward and reduce after the gather."
        out.append(text)
    return out


def _state(trace: Trace) -> str | None:
    state = trace.facts.get("state")
    if not state:
        return None
    (calls, plain_calls), (rows, plain_rows) = state["calls"], state["rows_seen"]
    forwards = sum(1 for s in trace.spans if s.phase == "forward" and s.order is not None)  # bodies that ran
    zero = sum(s.rows for s in trace.spans if s.phase == "forward" and s.replica == 0)
    if len(trace.lanes) == 1:
        return (f"**State set in forward.** With one device DataParallel calls the model itself, so its state "
                f"keeps: `calls` = {calls:,} and `rows_seen` = {rows:,}, as a plain model counts.")
    return (f"**State set in forward was lost.** After {plural(plain_calls, 'batch')} the model's `calls` is {calls:,}, "
            f"though replicas ran forward {plural(forwards, 'time')} (one device would say {plain_calls:,}): every batch "
            "DataParallel makes new replicas, shallow copies, and `self.calls += 1` rebinds the copy's own attribute, "
            f"which is thrown away after the batch. The buffer `rows_seen` says {rows:,} of {plain_rows:,} rows: replica "
            f"0's buffer shares storage with the model's, so its in-place additions stay (its chunks add up to "
            f"{zero:,}), while the other replicas added to copies. BatchNorm's running statistics follow the same "
            "rule: they come from replica 0's chunks only.")


def _inputs(trace: Trace) -> str | None:
    if trace.config.inputs == "tensor" or not trace.arguments:
        return None
    batch = trace.arguments[0].batch
    got = _arguments(trace, batch)
    split = {a.path for args in got.values() for a in args if a.mode == "split"}
    whole = {a.path: a for args in got.values() for a in args if a.mode != "split"}
    rows = trace.batches[batch].rows
    parts = []
    if split:
        with_tensors = [(r, args) for r, args in sorted(got.items()) if any(a.mode == "split" for a in args)]
        shapes = "; ".join(
            f"replica {r}: " + _listed([f"{markdown_text(a.path, LIMIT)} {_shape(a.shape)}" for a in args if a.mode == "split"])
            for r, args in with_tensors[:3]
        )
        parts.append(f"every tensor ({_listed([code_span(p, LIMIT) for p in sorted(split)])}) was split along dim {trace.dim} "
                     f"({shapes}{'; …' if len(with_tensors) > 3 else ''})")
    for a in list(whole.values())[:SHOWN]:
        how = ("the same object, shared by every replica" if a.mode == "shared"
               else "rebuilt whole for every replica, not split")
        extra = (f": each replica got all {a.shape[0]:,} items though it holds only its chunk's rows"
                 if a.shape and a.shape[0] == rows else "")
        parts.append(f"{_what(a)} is {how}{extra}")
    if len(whole) > SHOWN:
        parts.append(f"{len(whole) - SHOWN:,} more arguments were handed whole")
    return f"**What each replica got** (batch {counted(batch)}): " + "; ".join(parts) + "."


def _dim(trace: Trace) -> str | None:
    if trace.dim == 0:
        return None
    shape = trace.batches[0].input_shape
    return (f"**Split on dim {trace.dim}.** The time-first GRU takes (time, batch, features) = {_shape(shape)}, so "
            f"DataParallel(dim={trace.dim}) splits the batch along dim {trace.dim} and gathers the outputs along it "
            "too. `dim` applies to every tensor of the call: each must have its batch on that dim.")


def pitfalls(trace: Trace) -> list[str]:
    """Markdown paragraphs on what went wrong or surprises in this run; empty when nothing did."""
    paragraphs = [_failure(trace), *_warnings(trace), _state(trace), _inputs(trace), _dim(trace)]
    return [p for p in paragraphs if p]
