"""The split a loaded DataParallel trace must show: every batch's replica rows, by DataParallel's own rules.

    check_trace(trace)      # ValueError (one sentence) unless every batch splits as DataParallel splits it

A trace file may come from anyone; its replicas' rows are checked against what scatter_kwargs gives for
its model and input form, zip truncation and keyword padding included. The rule is plain integers
(dpviz.engines.dp.split_rules), so loading a trace imports no torch.
"""
from __future__ import annotations

from dpviz.trace import Batch, Trace
from dpviz.engines.dp.split_rules import replica_rows


def check_trace(trace: Trace) -> None:
    """Raise ValueError unless `trace` is what a DataParallel run could have recorded: its split."""
    check_split(trace)


def check_split(trace: Trace) -> None:
    """Raise ValueError unless every batch's replicas hold the rows DataParallel's split gives them."""
    failure = trace.failure
    rows_of: dict[int, list[int]] = {}  # DataParallel's split of a batch size: the same for every full batch
    for batch in trace.batches:
        # A failing batch stops part-way: its split is not checked, only that its replicas fit the batch.
        _check_replicas(trace, batch, rows_of, split=failure is None or batch.index != failure.batch)


def _check_replicas(trace: Trace, batch: Batch, rows_of: dict[int, list[int]], split: bool = True) -> None:
    """One batch's replicas: one per device in device order, each the rows DataParallel's split gives it."""
    replicas = trace.replicas(batch.index)
    if not split:
        if [(s.replica, s.lane) for s in replicas] != [(i, i) for i in range(len(replicas))] \
                or len(replicas) > trace.config.gpus:
            raise ValueError(f"batch {batch.index:,}'s replicas are not one per device in device order.")
    if split and batch.rows not in rows_of:
        rows_of[batch.rows] = replica_rows(trace.config, batch.rows, trace.facts.get("model"))
    expected = rows_of[batch.rows] if split else [s.rows for s in replicas]
    if [(s.replica, s.lane, s.rows) for s in replicas] != [(i, i, n) for i, n in enumerate(expected)]:
        raise ValueError(
            f"batch {batch.index:,}'s replicas got {[s.rows for s in replicas]} rows, but DataParallel splits "
            f"{batch.rows:,} rows over {trace.config.gpus} devices as {expected}."
        )
    end = 0
    for span in replicas:
        if span.row_offset < end or span.row_offset + span.rows > batch.rows:
            raise ValueError(
                f"replica {span.replica} of batch {batch.index:,} claims rows {span.row_offset:,}..{span.row_offset + span.rows:,} "
                f"of a {batch.rows:,}-row batch, overlapping another replica or past the end."
            )
        end = span.row_offset + span.rows
