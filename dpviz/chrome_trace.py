"""Export a trace in the Chrome Trace Event format, which Perfetto (ui.perfetto.dev) and chrome://tracing open.

One process, one track (thread) per device and one for the host thread that scatters, replicates and
gathers. Events are complete ("X") events with integer microsecond times; on any one track they
never overlap, because each track's spans run one after another.
"""
from __future__ import annotations

import json
from typing import Any, Iterator

from .trace import Trace
from .vocabulary import HOST

HOST_TID = 0


def _tid(lane: int | None) -> int:
    return HOST_TID if lane is None else lane + 1


def _events(trace: Trace) -> Iterator[dict[str, Any]]:
    """The trace's events one at a time: metadata naming the tracks, then one complete event per span."""
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


def _other(trace: Trace) -> dict[str, Any]:
    return {"backend": trace.backend, "torch": trace.torch_version}


def to_chrome_trace(trace: Trace) -> dict[str, Any]:
    """The Chrome Trace Event document as one dict."""
    return {"traceEvents": list(_events(trace)), "displayTimeUnit": "ms", "otherData": _other(trace)}


def dumps(trace: Trace) -> str:
    """The document as JSON text, written an event at a time: a 190,000-span trace never holds all its
    event dicts at once (about 140 MB), only their text."""
    encode = json.JSONEncoder(separators=(",", ":")).encode
    events = ",".join(encode(event) for event in _events(trace))
    return f'{{"traceEvents":[{events}],"displayTimeUnit":"ms","otherData":{encode(_other(trace))}}}'
