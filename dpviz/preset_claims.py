"""Each preset's lesson as a claim about its own run: a function of the trace that says whether the run shows what the
preset's text says, in the run's own numbers, and the words the preset's opening chart carries for it (its mark).

    claim = ALL_PRESETS["ddp-drop-last"].claim
    shown = claim(trace)            # Shown(holds=True, said="row 9 never loaded ...", mark="never loaded")

Readers only: a claim reads the trace (its batches, spans, failure and facts), never the recording side, so a
loaded file is held to its preset as a fresh run is.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dpviz.analysis.traffic import sent_per_step
from dpviz.catalogue import MODEL_SPECS

if TYPE_CHECKING:
    from dpviz.trace import Trace


@dataclass(frozen=True)
class Shown:
    """What a run shows of its preset's lesson: whether the claim holds, the claim in the run's numbers (or what the run
    showed instead), and the words on the opening tab's chart that point a class at it."""

    holds: bool
    said: str
    mark: str


def _rows(trace: Trace, batch: int) -> list[int]:
    """The rows of each replica (or rank) of one batch, in device order."""
    return [s.rows for s in trace.replicas(batch)]


def _idle(trace: Trace, batch: int) -> list[int]:
    used = {s.lane for s in trace.replicas(batch)}
    return [lane.id for lane in trace.lanes if lane.id not in used]


def _failed(trace: Trace, kind: str, batch: int) -> bool:
    return trace.failure is not None and trace.failure.type == kind and trace.failure.batch == batch


# ---------------------------------------------------------------- DataParallel's

def idle_gpus(trace: Trace) -> Shown:
    last = len(trace.batches) - 1
    rows, idle = _rows(trace, last), _idle(trace, last)
    holds = trace.batches[last].rows == 10 and rows == [2] * 5 and idle == [5, 6, 7] and trace.failure is None
    return Shown(holds, f"the last batch's {trace.batches[last].rows} rows split {rows}; idle: {idle}", "idle")


def batchnorm_one_row(trace: Trace) -> Shown:
    last = len(trace.batches) - 1
    rows = _rows(trace, last)
    holds = _failed(trace, "ValueError", last) and rows == [2, 2, 1] and rows[trace.failure.replica] == 1
    return Shown(holds, f"batch {last + 1} split {rows}, failure {trace.failure and trace.failure.headline}", "ValueError")


def kwargs_small_batch(trace: Trace) -> Shown:
    last = len(trace.batches) - 1
    with_x = {a.replica for a in trace.arguments if a.batch == last and not a.path.endswith("=")}
    without = sorted({a.replica for a in trace.arguments if a.batch == last} - with_x)
    holds = (_failed(trace, "TypeError", last) and sorted(with_x) == [0, 1, 2, 3, 4] and without == [5, 6, 7]
             and trace.failure.replica == 5)
    return Shown(holds, f"batch {last + 1}: replicas {without} called without x", "missing")


def scalar_loss(trace: Trace) -> Shown:
    losses = trace.facts.get("losses") or []
    last = losses[-1] if losses else {}
    gathered = last.get("gathered", [])
    mean = sum(gathered) / len(gathered) if gathered else 0.0
    warned = any("scalars" in note.message for note in trace.warnings)
    holds = warned and trace.failure is None and last.get("chunk_rows") == [4, 4, 2] and abs(mean - last["whole"]) > 1e-3
    return Shown(holds, f"the last batch's chunks {last.get('chunk_rows')}: mean of the vector {mean:.4f}, the batch's "
                        f"loss {last.get('whole', 0.0):.4f}", "off the batch's loss")


def rnn_hidden_dim(trace: Trace) -> Shown:
    replicas = len(trace.replicas(0)) if trace.batches else 0
    holds = _failed(trace, "RuntimeError", 0) and replicas == 1 < len(trace.lanes)
    return Shown(holds, f"{replicas} replica for {len(trace.lanes)} GPUs, then {trace.failure and trace.failure.type}",
                 f"1 replica for {len(trace.lanes)} GPUs")


def state_lost(trace: Trace) -> Shown:
    state = trace.facts.get("state") or {}
    calls, rows = state.get("calls", [None, None]), state.get("rows_seen", [None, None])
    holds = calls == [0, len(trace.batches)] and rows[0] is not None and 0 < rows[0] < rows[1]
    return Shown(holds, f"calls {calls}, rows_seen {rows} (kept, plain loop)", "lost")


# ---------------------------------------------------------------- DistributedDataParallel's

def _loaded(trace: Trace, step: int) -> dict[int, int]:
    """Rows each rank loaded in one step."""
    return {s.lane: s.rows for s in trace.spans_of(step, "forward") if s.lane is not None}


def ddp_batch_per_process(trace: Trace) -> Shown:
    per_rank = trace.config.batch_size
    steps = [_loaded(trace, b.index) for b in trace.batches]
    full = [step for step in steps if set(step.values()) == {per_rank}]
    ranks = len(trace.lanes)
    want_steps = -(-trace.config.data_size // (per_rank * ranks))
    holds = len(full) >= 2 and len(steps) == want_steps and all(sum(s.values()) == per_rank * ranks for s in full)
    return Shown(holds, f"{len(steps)} steps, {len(full)} of them with {per_rank} rows on each of {ranks} ranks "
                        f"({per_rank * ranks} a step)", f"{per_rank} rows a step")


def _epoch_rows(trace: Trace) -> list[list[int]]:
    """Each epoch's rows, every rank's forwards in step order (a whole number of steps per epoch)."""
    per = max(1, len(trace.batches) // max(1, getattr(trace.config, "epochs", 1) or 1))
    epochs: list[list[int]] = []
    for b in trace.batches:
        if b.index % per == 0:
            epochs.append([])
        epochs[-1].extend(row for s in sorted(trace.spans_of(b.index, "forward"), key=lambda s: s.lane or 0)
                          for row in trace.sample_ids(s))
    return epochs


def ddp_padding(trace: Trace) -> Shown:
    loaded = [sum(_loaded(trace, b.index).values()) for b in trace.batches]
    # DistributedSampler pads by dealing the start of its list again: a row a second time in the same epoch
    again = sorted(row for rows in _epoch_rows(trace) for row, times in Counter(rows).items() for _ in range(times - 1))
    per_rank = {r: sum(_loaded(trace, b.index).get(r, 0) for b in trace.batches) for r in range(len(trace.lanes))}
    holds = again == [0, 1] and set(per_rank.values()) == {4} and sum(loaded) == 12
    return Shown(holds, f"rows loaded again: {again}; rows per rank {per_rank}", "loaded again (padding)")


def ddp_drop_last(trace: Trace) -> Shown:
    seen = {row for b in trace.batches for row in b.sample_ids}
    never = sorted(set(range(trace.config.data_size)) - seen)
    per_rank = {r: sum(_loaded(trace, b.index).get(r, 0) for b in trace.batches) for r in range(len(trace.lanes))}
    holds = never == [9] and set(per_rank.values()) == {3}
    return Shown(holds, f"never loaded: rows {never}; rows per rank {per_rank}", "never loaded (drop_last)")


def ddp_no_set_epoch(trace: Trace) -> Shown:
    orders = _epoch_rows(trace)
    shuffled = bool(orders) and orders[0] != sorted(orders[0])
    holds = len(orders) == 2 and shuffled and orders[0] == orders[1]
    return Shown(holds, f"{len(orders)} epochs, the same order: {len(orders) == 2 and orders[0] == orders[1]}",
                 "the same rows in the same order")


def ddp_unused_parameter(trace: Trace) -> Shown:
    reduced = [b.index for b in trace.batches if trace.spans_of(b.index, "allreduce")]
    failure = trace.failure
    holds = (_failed(trace, "RuntimeError", 1) and "Expected to have finished reduction" in failure.message
             and reduced == [])
    return Shown(holds, f"steps with an all-reduce: {reduced}; failure {failure and failure.headline[:80]}",
                 "✗ raised")


def ddp_uneven(trace: Trace) -> Shown:
    steps = {r: sum(1 for b in trace.batches if _loaded(trace, b.index).get(r)) for r in range(len(trace.lanes))}
    holds = steps == {0: 4, 1: 3, 2: 3} and trace.failure is not None and trace.failure.batch == 3
    return Shown(holds, f"steps per rank {steps}; failure in step {trace.failure and trace.failure.batch + 1}",
                 "waits for<br>the timeout")  # Split's mark over the step rank 0 ran alone


# ---------------------------------------------------------------- where the memory goes

def _held(trace: Trace) -> list[dict]:
    held = trace.facts.get("held")
    return held if isinstance(held, list) else []


def ddp_adam_state(trace: Trace) -> Shown:
    held = _held(trace)
    params = [h["parameters"]["elements"] for h in held]
    state = [h["optimizer state"]["elements"] for h in held]
    holds = (len(held) == 4 and len(set(params)) == 1 and params[0] == 26_242 and state == [2 * params[0]] * 4
             and all(h["gradients"]["elements"] == params[0] for h in held))
    return Shown(holds, f"parameters {params}, optimizer state {state} elements per rank", "optimizer state")


def zero1_uneven(trace: Trace) -> Shown:
    held = _held(trace)
    state = sorted((h["optimizer state"]["elements"] for h in held), reverse=True)
    params = held[0]["parameters"]["elements"] if held else 0
    holds = len(state) == 4 and params == 8_274 and state[0] == 2 * 8_192 and sum(state[1:]) == 2 * 82
    return Shown(holds, f"optimizer state per rank (largest first): {state} of {params} parameters'", "optimizer state")


def fsdp_keep_gathered(trace: Trace) -> Shown:
    gathers = [s for s in trace.spans if s.phase in ("gather", "gather_backward")]
    in_backward = [s for s in gathers if s.phase == "gather_backward"]
    holds = bool(gathers) and not in_backward and trace.failure is None
    return Shown(holds, f"{len(gathers)} all-gathers, {len(in_backward)} in backward",
                 "no all-gather in backward")


def compare_gpu0(trace: Trace) -> Shown:
    """The comparison's second engine, DDP: every rank all-reduces the 1 MiB of gradients each step, more than a
    step's rows (DataParallel's GPU 0 copies the parameters to 7 others: the comparison draws both)."""
    held = _held(trace)
    params = held[0]["parameters"]["bytes"] if held else 0
    batch = trace.config.batch_size * trace.config.input_size * 4  # a whole batch's rows, float32
    holds = len(held) == 8 and params == (512 * 512 + 512) * 4 and params > batch
    return Shown(holds, f"parameters {params:,} B per rank, a batch's rows {batch:,} B", "GPU 0 sends")


def _sent_per_step(trace: Trace) -> int:
    """The most bytes one rank sent in one whole step: the step Compare reads (dpviz.analysis.traffic.counted_step),
    so that the claim and the bars it stands beside count the same bytes."""
    return round(max(sent_per_step(trace), default=0))


def compare_tp_fsdp(trace: Trace, first: Trace | None = None) -> Shown:
    """The comparison's two runs: the TP rank sends more bytes per step (all-reduces of activations) than the FSDP
    rank (all-gathers and a reduce-scatter of parameters), and the FSDP rank holds fewer parameter elements."""
    if first is None:
        return Shown(False, "the comparison's claim reads both runs: the TP run was not given", "a TP rank sends")
    tp_sent, fsdp_sent = _sent_per_step(first), _sent_per_step(trace)
    tp_held, fsdp_held = (max(h["parameters"]["elements"] for h in _held(t)) if _held(t) else 0 for t in (first, trace))
    kinds = {m.kind for m in trace.spec.part("traffic")(trace)}, {m.kind for m in first.spec.part("traffic")(first)}
    # Which run is which, told by what each moves (the second's all-gathers and reduce-scatter, the first's
    # all-reduces), not by the engines' names: swapped, the claim fails.
    holds = (tp_sent > fsdp_sent > 0 and 0 < fsdp_held < tp_held
             and kinds == ({"all-gather", "reduce-scatter"}, {"all-reduce"}) and trace.failure is None is first.failure)
    return Shown(holds, f"in one whole step a TP rank sent {tp_sent:,} B, an FSDP rank {fsdp_sent:,} B; parameter elements "
                        f"held per rank: TP {tp_held:,}, FSDP {fsdp_held:,}", "a TP rank sends")


def _all_reduces(trace: Trace, phase: str) -> int:
    """Rank 0's all-reduces of one pass (`phase`) in the run's first step."""
    first = trace.batches[0].index if trace.batches else 0
    return sum(1 for s in trace.spans_of(first, phase) if s.lane == 0)


def _cut(trace: Trace) -> list[dict]:
    return next((rank for rank in trace.facts.get("cut_modules") or [] if rank), [])


def tp_megatron_f_g(trace: Trace) -> Shown:
    # each block: attention's output and the MLP's down projection row-wise (g in forward), the inputs of attention
    # and of the MLP shared (f in backward)
    blocks = sum(1 for m in _cut(trace) if m["style"] == "rowwise") // 2
    forward, backward = _all_reduces(trace, "allreduce_forward"), _all_reduces(trace, "allreduce_backward")
    holds = blocks >= 1 and forward == backward == 2 * blocks
    return Shown(holds, f"{blocks} blocks: {forward} all-reduces in forward and {backward} in backward on rank 0 in a "
                        "step", "all-reduce")


def tp_ffn_forward_only(trace: Trace) -> Shown:
    forward, backward = _all_reduces(trace, "allreduce_forward"), _all_reduces(trace, "allreduce_backward")
    holds = forward == 1 and backward == 0
    return Shown(holds, f"{forward} all-reduce in forward and {backward} in backward on rank 0 in a step", "all-reduce")


def tp_heads_split(trace: Trace) -> Shown:
    ranks = len(trace.lanes)
    heads = [m for m in _cut(trace) if m["name"].rsplit(".", 1)[-1] in ("wq", "wk", "wv")]
    holds = ranks == 4 and bool(heads) and all(m["style"] == "colwise" for m in heads) and trace.failure is None
    count = MODEL_SPECS[trace.config.model].tensor.heads if trace.config.model in MODEL_SPECS else 0
    holds = holds and count > 0 and count % ranks == 0
    return Shown(holds, f"{len(heads)} of q, k and v's Linears cut column-wise over {ranks} ranks, {count} heads",
                 f"{count // max(ranks, 1)} of the {count} attention heads")  # One step's title: each rank's heads
