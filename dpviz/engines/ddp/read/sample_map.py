"""Sample map of a DistributedDataParallel run: which dataset row each rank loaded in which step.

DistributedSampler deals its (shuffled, padded) list out in strides: rank r takes L[r], L[r + W],
L[r + 2W], ... So one step's rows, read in the list's order, go rank 0, rank 1, ..., rank W-1, rank 0,
... The bottom panel lays every step out in that order, so the stride shows as repeating colours where
DataParallel's map shows one contiguous slice per GPU. (A trace keeps each step's rows rank after rank;
the order is rebuilt from the ranks' forwards, see dpviz.engines.ddp.read.tables.sampler_order.) Rows the sampler
loaded a second time in an epoch, its padding, are ringed in both panels.
"""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from dpviz.engines.ddp.read.tables import epoch_of, epochs_of, rank_rows, repeated_rows, sampler_order
from dpviz.trace import Trace
from dpviz.figures.sample_map import MapWords, plot_sample_map
from dpviz.engines.ddp.read.words import ddp_note
from dpviz.analysis.wording import plural


def prepare_sample_map_ddp(trace: Trace) -> tuple[pd.DataFrame, list[tuple[int, int]]]:
    """One row per loaded row: dataset row, step, its place in the step in the sampler's order, rank;
    and (step, place) of every row loaded again that epoch."""
    records, repeats = [], []
    flags = repeated_rows(trace)
    for batch in trace.batches:
        forwards = rank_rows(trace, batch.index)
        for place, (rank, position) in enumerate(sampler_order(trace, batch.index)):
            if position >= len(batch.sample_ids):
                continue
            records.append((batch.sample_ids[position], batch.index, place, rank))
            if flags[batch.index][rank][position - forwards[rank].row_offset]:
                repeats.append((batch.index, place))
    table = pd.DataFrame.from_records(records, columns=["sample", "batch", "position", "device"])
    return table.astype("int64"), repeats


def dropped_rows(trace: Trace) -> list[tuple[int, int]]:
    """(dataset row, the last step of its epoch) of every row an epoch never loaded, when the sampler dropped its
    tail (drop_last=True): each rank loads as many rows, and the rest of the dataset is left out."""
    if not getattr(trace.config, "drop_last", False):
        return []
    loaded: dict[int, set[int]] = {}
    last: dict[int, int] = {}
    for batch in trace.batches:
        epoch = epoch_of(trace, batch.index)
        loaded.setdefault(epoch, set()).update(batch.sample_ids)
        last[epoch] = batch.index
    return [(row, last[epoch]) for epoch, rows in loaded.items()
            for row in range(trace.config.data_size) if row not in rows]


def same_order(trace: Trace) -> bool:
    """Whether every epoch loaded the same rows in the same order (set_epoch never called on a shuffled sampler)."""
    orders: dict[int, list[int]] = {}
    for batch in trace.batches:
        orders.setdefault(epoch_of(trace, batch.index), []).extend(batch.sample_ids)
    return epochs_of(trace) > 1 and len(orders) > 1 and all(order == orders[0] for order in orders.values())


def strided(trace: Trace) -> bool:
    """Whether every step's ranks loaded as many rows each (DistributedSampler's equal shares), so the
    step reads in the sampler's strided order; data split by hand (uneven shards) reads rank after rank."""
    if getattr(trace.config, "uneven", False):
        return False
    return all(len({s.rows for s in rank_rows(trace, b.index).values()}) <= 1 for b in trace.batches)


def sample_map_ddp_figure(trace: Trace) -> go.Figure:
    """Which dataset row each rank loaded in which step, each step in the order the sampler dealt it."""
    table, repeats = prepare_sample_map_ddp(trace)
    ranks = len(trace.lanes)
    noun = trace.vocabulary.lane_noun
    if strided(trace):
        bottom = f"Inside each step: the sampler's list, dealt out in strides, one row to each {noun} in turn"
        bottom_x = f"place in the step's part of the sampler's list ({noun} r takes places r, r + {ranks}, …)"
    else:
        bottom = f"Inside each step: each {noun}'s own rows, {noun} after {noun}"
        bottom_x = f"row within the step ({noun} after {noun})"
    dropped = dropped_rows(trace)
    epochs = tuple(b.index for b in trace.batches
                   if b.index == 0 or epoch_of(trace, b.index) != epoch_of(trace, b.index - 1))  # each one's first step
    words = MapWords(lane=noun, batch="step", batches="steps", bottom=bottom, bottom_x=bottom_x, repeats=tuple(repeats),
                     dropped=tuple(dropped), epochs=epochs if epochs_of(trace) > 1 else ())
    config = trace.config
    order = "shuffled (DistributedSampler shuffle=True)" if config.shuffle else "in order (shuffle=False)"
    title = f"{plural(len(table), 'row')} loaded in {plural(len(trace.batches), 'step')}, {order}"
    notes = [ddp_note(trace)]
    if repeats:
        notes.append(f"ringed: {plural(len(repeats), 'row')} loaded again, the sampler's padding")
    if dropped:
        rows = sorted({row for row, _ in dropped})
        named = ", ".join(map(str, rows[:8])) + (" …" if len(rows) > 8 else "")
        notes.append(f"✕ {'row' if len(rows) == 1 else 'rows'} {named}: never loaded (drop_last), the rest after "
                     f"an equal share for every {noun}")
    if same_order(trace):  # the lesson, in the title: the epochs' rows are marked on the map to compare
        title = (f"{plural(epochs_of(trace), 'epoch')} of {plural(config.data_size, 'row')}, shuffled, but set_epoch "
                 "was never called: every epoch loads the same rows in the same order")
    return plot_sample_map(table, devices=ranks, data_size=config.data_size, batches=len(trace.batches),
                           title=title, notes=notes, words=words)
