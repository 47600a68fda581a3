"""Export a trace in the Chrome Trace Event format, which Perfetto (ui.perfetto.dev) and chrome://tracing open.

DataParallel: one process, one track (thread) per device and one for the host thread that scatters,
replicates and gathers. DistributedDataParallel: one process per rank, named as its lane, with the
rank's compute on one track and its bucket all-reduces on a track of their own beside it (as Perfetto
shows a GPU's NCCL stream beside its compute); an all-reduce that starts before the one before it has
ended (gloo runs them on worker threads) goes on a second such track. Events are complete ("X")
events with integer microsecond times; on any one track they never overlap.
"""
from __future__ import annotations

import json
from typing import Any, Iterator

from dpviz.trace import Trace


def _events(trace: Trace) -> Iterator[dict[str, Any]]:
    """The trace's events one at a time: metadata naming the tracks, then one complete event per span."""
    yield from trace.spec.part("chrome_events")(trace)


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
