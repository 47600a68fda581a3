"""A DataParallel trace as Chrome trace events: one process, the host's thread and one thread per device."""
from __future__ import annotations

from typing import Any, Iterator

from dpviz.trace import Trace
from dpviz.trace.vocabulary import HOST


HOST_TID = 0


def _tid(lane: int | None) -> int:
    return HOST_TID if lane is None else lane + 1


def dp_events(trace: Trace) -> Iterator[dict[str, Any]]:
    """DataParallel: one process, a track for the host thread and one per device."""
    kind = "simulated devices" if trace.simulated else "CUDA"
    yield {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": f"{trace.vocabulary.title} ({kind})"}}
    yield {"ph": "M", "name": "thread_name", "pid": 0, "tid": HOST_TID,
           "args": {"name": "host: " + " / ".join(trace.vocabulary.where(HOST))}}
    yield {"ph": "M", "name": "thread_sort_index", "pid": 0, "tid": HOST_TID, "args": {"sort_index": 0}}
    for lane in trace.lanes:
        yield {"ph": "M", "name": "thread_name", "pid": 0, "tid": _tid(lane.id), "args": {"name": lane.name}}
        yield {"ph": "M", "name": "thread_sort_index", "pid": 0, "tid": _tid(lane.id), "args": {"sort_index": lane.id + 1}}
    for span in sorted(trace.spans, key=lambda s: (s.start, s.end)):
        # Round the ends, not the durations, so that back-to-back spans never overlap after rounding.
        ts = round(span.start * 1e6)
        args: dict[str, Any] = {"batch": span.batch}
        if span.phase == "forward":
            args.update(replica=span.replica, rows=span.rows, first_row=span.row_offset,
                        input_shape=span.input_shape, output_shape=span.output_shape, thread=span.thread)
        yield {
            "ph": "X", "name": span.phase if span.phase != "forward" else f"forward batch {span.batch}",
            "cat": span.phase, "pid": 0, "tid": _tid(span.lane), "ts": ts, "dur": round(span.end * 1e6) - ts,
            "args": args,
        }
