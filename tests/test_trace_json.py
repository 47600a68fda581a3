"""Traces survive a JSON round trip; bad files are refused with one clear sentence."""
import dataclasses
import json
import re

import pytest

from dpviz import RunConfig, TraceError, record
from dpviz.trace import cost as trace_cost
from dpviz.trace import json_io as trace_json


@pytest.fixture(scope="module")
def trace():
    return record(RunConfig(gpus=3))


def _rounded(trace):
    """The trace with its times at the 0.1 us the file keeps."""
    spans = [dataclasses.replace(s, start=round(s.start, 7), end=round(s.end, 7)) for s in trace.spans]
    return dataclasses.replace(trace, spans=spans)


@pytest.mark.parametrize("train", [False, True])
def test_round_trip_is_exact(train):
    trace = record(RunConfig(gpus=3, train=train))
    loaded = trace_json.loads(trace_json.dumps(trace))
    assert loaded == _rounded(trace)
    assert trace_json.dumps(loaded) == trace_json.dumps(trace)


def _edited(trace, edit):
    data = json.loads(trace_json.dumps(trace))
    edit(data)
    return json.dumps(data)


class _Row(dict):
    """A span row seen as a dict: edits go back into the row."""

    def __init__(self, fields, row):
        super().__init__(zip(fields, row))
        self.fields, self.row = fields, row

    def update(self, **changes):
        for key, value in changes.items():
            if key in self.fields:
                self.row[self.fields.index(key)] = value
            else:
                self.row.append(value)


def _forward(data, replica=2, batch=3):
    rows = (_Row(data["span_fields"], row) for row in data["spans"])
    return next(r for r in rows if r["phase"] == "forward" and r["batch"] == batch and r["replica"] == replica)


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
    "extra span value": lambda t: _edited(t, lambda d: _forward(d).update(pickle="x")),
    "renamed span field": lambda t: _edited(t, lambda d: d["span_fields"].__setitem__(0, "kind")),
    "thread not in list": lambda t: _edited(t, lambda d: _forward(d).update(thread=99)),
    "memory on unknown lane": lambda t: _edited(t, lambda d: d["memory"][0].__setitem__(2, 9)),
    "negative memory": lambda t: _edited(t, lambda d: d["memory"][0].__setitem__(4, -1)),
    "unknown memory kind": lambda t: _edited(t, lambda d: d.update(memory_kind="guessed")),
    "memory of unknown category": lambda t: _edited(t, lambda d: d["memory"][0].__setitem__(3, "vibes")),
    "deeply nested": lambda t: "[" * 100_000,
    "huge number": lambda t: "1" * 5000,
    "infinite time": lambda t: _edited(t, lambda d: _forward(d).update(end=float("inf"))),
    "negative machine gpus": lambda t: _edited(t, lambda d: d.update(machine_gpus=-1)),
    "measured on simulated": lambda t: _edited(t, lambda d: d.update(memory_kind="measured")),
    "uneven split": lambda t: _edited(t, lambda d: (_forward(d, replica=1).update(rows=5), _forward(d).update(rows=1, row_offset=9))),
    "wrong batch sizes": lambda t: _edited(t, lambda d: (d["batches"][0]["sample_ids"].pop(), d["batches"][0]["input_shape"].__setitem__(0, 29))),
    "string as shape": lambda t: _edited(t, lambda d: _forward(d).update(input_shape="30,5")),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_files_get_one_sentence(trace, case):
    with pytest.raises(TraceError) as error:
        trace_json.loads(BAD[case](trace))
    message = str(error.value)
    assert "\n" not in message and message.endswith(".") and len(message) < 300


def test_oversized_files_are_refused_before_parsing(trace, monkeypatch):
    monkeypatch.setattr(trace_cost, "MAX_TRACE_BYTES", 1000)
    with pytest.raises(TraceError, match="limited to"):
        trace_json.loads(trace_json.dumps(trace))


def test_bytes_that_are_not_utf8_are_refused(trace):
    with pytest.raises(TraceError, match="not valid JSON"):
        trace_json.loads(b"\xff\xfe{")


def _loss_trace_data():
    return json.loads(trace_json.dumps(record(RunConfig(model="loss", gpus=3))))


@pytest.mark.parametrize("edit,words", [
    (lambda d: d["facts"]["losses"][0].update(whole="x"), "should be int or float"),
    (lambda d: d["facts"]["losses"][0].update(gathered=[]), "one gathered loss per chunk"),
    (lambda d: d["facts"].update(state={"foo": [1, 2]}), "'calls' and 'rows_seen'"),
    (lambda d: d.update(batches=[], failure={"batch": -1, "type": "E", "message": "m", "replica": None}), "failed in batch -1"),
])
def test_bad_schema_2_fields_are_one_sentence(edit, words):
    data = _loss_trace_data()
    edit(data)
    with pytest.raises(TraceError, match=re.escape(words)):
        trace_json.loads(json.dumps(data))


def test_a_failing_batch_still_has_its_replicas_checked():
    from dpviz.presets import PRESETS

    data = json.loads(trace_json.dumps(record(PRESETS["batchnorm-one-row"].config)))
    assert trace_json.loads(json.dumps(data)).failure is not None
    fields = data["span_fields"]
    row = next(r for r in data["spans"] if r[fields.index("phase")] == "forward" and r[fields.index("batch")] == 3)
    row[fields.index("rows")] = 10**9
    with pytest.raises(TraceError, match="past the end"):
        trace_json.loads(json.dumps(data))


def test_schema_3_names_the_engine_and_its_vocabulary(trace):
    data = trace_json.to_dict(trace)
    assert data["version"] == 3 and data["engine"] == "dp" and data["config"]["engine"] == "dp"
    assert data["phases"] == list(trace.vocabulary.names) and data["memory_kinds"] == list(trace.vocabulary.memory_names)


def test_version_2_files_name_no_engine_and_still_load(trace):
    data = trace_json.to_dict(trace)
    for key in ("engine", "phases", "memory_kinds"):
        del data[key]
    del data["config"]["engine"]
    data["version"] = 2
    loaded = trace_json.loads(json.dumps(data))
    assert loaded.engine == "dp" and loaded.spans == _rounded(trace).spans and loaded.batches == trace.batches


@pytest.mark.parametrize("edit, words", [
    (lambda d: d.update(engine="tensor_parallel"), "engine must be one of dp, ddp"),
    (lambda d: d.update(engine="ddp"), "DistributedDataParallel phases are not the ones this dpviz knows"),
    (lambda d: d.update(phases=d["phases"][:-1] + ["teleport"]), "phases are not the ones this dpviz knows"),
    (lambda d: d.update(memory_kinds=["parameters", "dark matter"]), "memory kinds are not the ones this dpviz knows"),
    (lambda d: d["config"].update(engine="tpu"), "engine must be one of dp, ddp"),
])
def test_a_foreign_engine_or_vocabulary_is_one_sentence(trace, edit, words):
    data = trace_json.to_dict(trace)
    edit(data)
    with pytest.raises(TraceError, match=words) as error:
        trace_json.loads(json.dumps(data))
    assert "\n" not in str(error.value) and str(error.value).endswith(".")


def test_a_file_written_before_a_phase_was_added_still_loads(trace):
    data = trace_json.to_dict(trace)
    data["phases"] = [p for p in data["phases"] if p not in ("loss", "backward", "reduce", "step")]  # forward only
    data["memory_kinds"] = data["memory_kinds"][:3]
    assert trace_json.loads(json.dumps(data)).spans == _rounded(trace).spans
