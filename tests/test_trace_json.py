"""Traces survive a JSON round trip; bad files are refused with one clear sentence."""
import json

import pytest

from dpviz import RunConfig, TraceError, record, trace_json


@pytest.fixture(scope="module")
def trace():
    return record(RunConfig(gpus=3))


def test_round_trip_is_exact(trace):
    loaded = trace_json.loads(trace_json.dumps(trace))
    assert loaded == trace
    assert trace_json.dumps(loaded) == trace_json.dumps(trace)


def _edited(trace, edit):
    data = json.loads(trace_json.dumps(trace))
    edit(data)
    return json.dumps(data)


def _forward(data, replica=2, batch=3):
    return next(s for s in data["spans"] if s["phase"] == "forward" and s["batch"] == batch and s["replica"] == replica)


BAD = {
    "not json": lambda t: "{not json",
    "not a trace": lambda t: json.dumps({"hello": 1}),
    "a list": lambda t: "[]",
    "future version": lambda t: _edited(t, lambda d: d.update(version=99)),
    "missing field": lambda t: _edited(t, lambda d: d.pop("batches")),
    "wrong type": lambda t: _edited(t, lambda d: d.update(machine_gpus="two")),
    "bad config": lambda t: _edited(t, lambda d: d["config"].update(gpus=99)),
    "unknown backend": lambda t: _edited(t, lambda d: d.update(backend="tpu")),
    "lanes vs config": lambda t: _edited(t, lambda d: d["lanes"].pop()),
    "row seen twice": lambda t: _edited(t, lambda d: d["batches"][1]["sample_ids"].__setitem__(0, d["batches"][0]["sample_ids"][0])),
    "row outside data": lambda t: _edited(t, lambda d: d["batches"][0]["sample_ids"].__setitem__(0, 10_000)),
    "batch missing": lambda t: _edited(t, lambda d: d["batches"].pop()),
    "replica past the end": lambda t: _edited(t, lambda d: _forward(d).update(rows=9)),
    "replicas overlap": lambda t: _edited(t, lambda d: _forward(d).update(row_offset=3)),
    "span on unknown lane": lambda t: _edited(t, lambda d: _forward(d).update(lane=7)),
    "unknown phase": lambda t: _edited(t, lambda d: _forward(d).update(phase="teleport")),
    "ends before start": lambda t: _edited(t, lambda d: _forward(d).update(end=-1.0)),
    "unknown span field": lambda t: _edited(t, lambda d: _forward(d).update(pickle="x")),
    "string as shape": lambda t: _edited(t, lambda d: _forward(d).update(input_shape="30,5")),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_files_get_one_sentence(trace, case):
    with pytest.raises(TraceError) as error:
        trace_json.loads(BAD[case](trace))
    message = str(error.value)
    assert "\n" not in message and message.endswith(".") and len(message) < 300


def test_oversized_files_are_refused_before_parsing(trace, monkeypatch):
    monkeypatch.setattr(trace_json, "MAX_TRACE_BYTES", 1000)
    with pytest.raises(TraceError, match="limited to"):
        trace_json.loads(trace_json.dumps(trace))


def test_bytes_that_are_not_utf8_are_refused(trace):
    with pytest.raises(TraceError, match="not valid JSON"):
        trace_json.loads(b"\xff\xfe{")
