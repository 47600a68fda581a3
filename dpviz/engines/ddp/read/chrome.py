"""A DDP trace as Chrome trace events: one process per rank, its compute thread and its all-reduce tracks."""
from __future__ import annotations

from typing import Any, Iterator

from dpviz.trace import Span, Trace


COMPUTE_TID = 0  # a DDP rank's own thread: load, forward, loss, backward, step


ALLREDUCE_TID = 1  # its bucket all-reduces, and ALLREDUCE_TID + k for the k-th track of overlapping ones


def ddp_events(trace: Trace) -> Iterator[dict[str, Any]]:
    """A DDP trace's events: per rank a process, its compute track and its all-reduce tracks."""
    from dpviz.engines.ddp.read.tables import bucket_layouts  # here: it imports pandas, which a DataParallel export never needs

    tracks = _allreduce_tracks(trace)
    lanes = {lane.id for lane in trace.lanes}
    default = "NCCL" if trace.backend == "cuda" else "gloo"
    backends = {span.lane: span.thread for span in trace.spans if span.phase == "allreduce" and span.thread}
    for lane in trace.lanes:
        pid = lane.id
        yield {"ph": "M", "name": "process_name", "pid": pid, "tid": COMPUTE_TID, "args": {"name": lane.name}}
        yield {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": COMPUTE_TID, "args": {"sort_index": pid}}
        yield {"ph": "M", "name": "thread_name", "pid": pid, "tid": COMPUTE_TID,
               "args": {"name": "compute (the rank's main thread)"}}
        yield {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": COMPUTE_TID, "args": {"sort_index": 0}}
        used = max((track for (span_lane, _), track in tracks.items() if span_lane == pid), default=0)
        for track in range(used + 1 if trace.vocabulary.names_where_grouped else 0):  # a pipeline all-reduces nothing
            name = f"all-reduce ({backends.get(pid, default)})" + (f" #{track + 1}" if track else "")
            yield {"ph": "M", "name": "thread_name", "pid": pid, "tid": ALLREDUCE_TID + track, "args": {"name": name}}
            yield {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": ALLREDUCE_TID + track,
                   "args": {"sort_index": ALLREDUCE_TID + track}}
    layouts = bucket_layouts(trace)
    group = trace.vocabulary.group_noun or "group"  # the engine's word for what an all-reduce is of: DDP's "bucket"
    for index, span in sorted(enumerate(trace.spans), key=lambda item: (item[1].start, item[1].end)):
        ts = round(span.start * 1e6)
        pid = span.lane if span.lane in lanes else 0
        args: dict[str, Any] = {"step": span.batch, "rank": pid}
        tid, name = COMPUTE_TID, span.phase
        if span.phase == "forward":
            name = f"forward step {span.batch}"
            args.update(rows=span.rows, first_row=span.row_offset, input_shape=span.input_shape,
                        output_shape=span.output_shape)
        elif span.phase == "allreduce":
            tid, name = ALLREDUCE_TID + tracks.get((pid, index), 0), f"all-reduce {group} {span.group}"
            args.update({group: span.group}, **_bucket(layouts, span))
            if span.thread:
                args["backend"] = span.thread
        if span.microbatch is not None:  # a pipeline stage's pass or transfer: which microbatch it was of
            name += f" microbatch {span.microbatch}"
            args["microbatch"] = span.microbatch
        yield {"ph": "X", "name": name, "cat": span.phase, "pid": pid, "tid": tid, "ts": ts,
               "dur": round(span.end * 1e6) - ts, "args": args}


def _allreduce_tracks(trace: Trace) -> dict[tuple[int, int], int]:
    """(rank, span's index in trace.spans) -> which all-reduce track of its rank: the first whose last
    event has ended (in whole microseconds, as written) when this one starts."""
    lanes = {lane.id for lane in trace.lanes}
    ends: dict[int, list[int]] = {}  # per rank, the end of the last event on each of its tracks
    tracks = {}
    spans = [(i, s) for i, s in enumerate(trace.spans) if s.phase == "allreduce"]
    for index, span in sorted(spans, key=lambda item: (item[1].start, item[1].end)):
        pid = span.lane if span.lane in lanes else 0
        start, end = round(span.start * 1e6), round(span.end * 1e6)
        free = ends.setdefault(pid, [])
        track = next((t for t, last in enumerate(free) if last <= start), len(free))
        if track == len(free):
            free.append(end)
        else:
            free[track] = end
        tracks[(pid, index)] = track
    return tracks


def _bucket(layouts: list[dict[str, Any]], span: Span) -> dict[str, Any]:
    """What the all-reduced bucket held: its parameters and bytes in the layout in effect in the span's
    step (the last one recorded at or before it); nothing when the trace does not say."""
    current = [layout for layout in layouts if layout["step"] <= span.batch]
    for bucket in (current[-1].get("buckets") or []) if current else []:
        if isinstance(bucket, dict) and bucket.get("index") == span.group:
            return {"params": bucket.get("params", []), "bytes": bucket.get("bytes")}
    return {}
