"""Export a trace in the Chrome Trace Event format, which Perfetto (ui.perfetto.dev) and chrome://tracing open.

One process, one track (thread) per device and one for the host thread that scatters, replicates and
gathers. Events are complete ("X") events with integer microsecond times; on any one track they
never overlap, because each track's spans run one after another.
"""
from __future__ import annotations

import json
from typing import Any

from .trace import Trace

HOST_TID = 0


def _tid(lane: int | None) -> int:
    return HOST_TID if lane is None else lane + 1


def to_chrome_trace(trace: Trace) -> dict[str, Any]:
    kind = "simulated devices" if trace.simulated else "CUDA"
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": f"{trace.vocabulary.title} ({kind})"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": HOST_TID,
         "args": {"name": "host: " + " / ".join(trace.vocabulary.where("host"))}},
        {"ph": "M", "name": "thread_sort_index", "pid": 0, "tid": HOST_TID, "args": {"sort_index": 0}},
    ]
    for lane in trace.lanes:
        events.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": _tid(lane.id), "args": {"name": lane.name}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": 0, "tid": _tid(lane.id), "args": {"sort_index": lane.id + 1}})
    for span in sorted(trace.spans, key=lambda s: (s.start, s.end)):
        # Round the ends, not the durations, so that back-to-back spans never overlap after rounding.
        ts = round(span.start * 1e6)
        args: dict[str, Any] = {"batch": span.batch}
        if span.phase == "forward":
            args.update(replica=span.replica, rows=span.rows, first_row=span.row_offset,
                        input_shape=span.input_shape, output_shape=span.output_shape, thread=span.thread)
        events.append({
            "ph": "X", "name": span.phase if span.phase != "forward" else f"forward batch {span.batch}",
            "cat": span.phase, "pid": 0, "tid": _tid(span.lane), "ts": ts, "dur": round(span.end * 1e6) - ts,
            "args": args,
        })
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"backend": trace.backend, "torch": trace.torch_version}}


def dumps(trace: Trace) -> str:
    return json.dumps(to_chrome_trace(trace), separators=(",", ":"))
