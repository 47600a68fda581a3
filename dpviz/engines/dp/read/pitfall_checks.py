"""Whether a run shows each pitfall the Pitfall view draws: asked of every new run, before its first chart.

    any(applies(trace) for applies in PITFALL_APPLIES)   # does the page give it a Pitfall tab?

Plain Python over the trace (no pandas, no plotly): each figure in pitfall_hidden, pitfall_loss and
pitfall_state draws only when its check here says so.
"""
from __future__ import annotations

from collections import defaultdict

from dpviz.trace import ArgumentSample, Trace


def misplaced(trace: Trace) -> tuple[int, str, list[ArgumentSample]] | None:
    """The first (batch, argument, pieces) whose split pieces do not add up to the batch's rows on
    DataParallel's dim: a tensor whose batch sits on another dim."""
    pieces: dict[tuple[int, str], list[ArgumentSample]] = defaultdict(list)
    for a in trace.arguments:
        if a.mode == "split" and a.kind == "tensor" and len(a.shape) > trace.dim:
            pieces[(a.batch, a.path)].append(a)
    for (batch, path), got in sorted(pieces.items()):
        if sum(a.shape[trace.dim] for a in got) != trace.batches[batch].rows:
            return batch, path, sorted(got, key=lambda a: a.replica)
    return None


def _drawn(trace: Trace) -> bool:
    """Whether the trace's engine draws these pitfalls (DataParallel's: one process scattering and gathering),
    on more than one device, where they happen."""
    return trace.spec.has("view.pitfall") and len(trace.lanes) >= 2


def shows_hidden_cut(trace: Trace) -> bool:
    """Whether a split tensor's pieces fail to add up to the batch's rows (h0 cut along its layers)."""
    return _drawn(trace) and misplaced(trace) is not None


def shows_loss_bias(trace: Trace) -> bool:
    """Whether forward returned a 0-dim loss on more than one device (facts["losses"] holds what gather made of it)."""
    return _drawn(trace) and bool(trace.facts.get("losses"))


def shows_state_lost(trace: Trace) -> bool:
    """Whether the model counted in forward on more than one device (facts["state"]: its counters after the run)."""
    return _drawn(trace) and bool(trace.facts.get("state"))


PITFALL_APPLIES = (shows_hidden_cut, shows_loss_bias, shows_state_lost)  # in PITFALL_FIGURES' order


def has_pitfall(trace: Trace) -> bool:
    """Whether the run ran into a pitfall the Pitfall view draws (h0 cut on its layers, a loss per GPU, state lost
    in forward); the keyword pitfall is drawn in Split and Inputs, where it happens. Each pitfall is asked whether
    it applies, rather than its figure drawn."""
    return any(applies(trace) for applies in PITFALL_APPLIES)
