"""The Chrome Trace Event export: valid for Perfetto, one track per device, no overlaps on a track."""
import json
from collections import defaultdict

from dpviz import RunConfig, record
from dpviz.engines.ddp.read import chrome as ddp_chrome
from dpviz.exports import chrome_trace


def test_events_are_valid_and_never_overlap_on_a_track():
    trace = record(RunConfig(gpus=8, data_size=300, batch_size=30))
    data = json.loads(chrome_trace.dumps(trace))
    events = data["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert [names[lane.id + 1] for lane in trace.lanes] == [lane.name for lane in trace.lanes]
    by_track = defaultdict(list)
    for event in events:
        assert event["ph"] in ("M", "X")
        if event["ph"] == "X":
            assert isinstance(event["ts"], int) and isinstance(event["dur"], int) and event["dur"] >= 0
            assert event["tid"] in names
            by_track[event["tid"]].append((event["ts"], event["ts"] + event["dur"]))
    for track in by_track.values():
        track.sort()
        assert all(end <= next_start for (_, end), (next_start, _) in zip(track, track[1:]))


def test_one_forward_event_per_replica_on_its_devices_track():
    trace = record(RunConfig(gpus=8))
    events = [e for e in chrome_trace.to_chrome_trace(trace)["traceEvents"] if e.get("cat") == "forward"]
    replicas = [s for b in trace.batches for s in trace.replicas(b.index)]
    assert len(events) == len(replicas) == 3 * 8 + 5
    assert sorted((e["tid"] - 1, e["args"]["batch"]) for e in events) == sorted((s.lane, s.batch) for s in replicas)
    assert sum(e["args"]["rows"] for e in events) == 100


def test_the_text_written_event_by_event_is_the_document_byte_for_byte():
    trace = record(RunConfig(gpus=3, train=True))
    assert chrome_trace.dumps(trace) == json.dumps(chrome_trace.to_chrome_trace(trace), separators=(",", ":"))


# ---- DistributedDataParallel: a process per rank, its all-reduces on tracks beside its compute

import pytest

from dpviz.trace import json_io as trace_json
from dpviz.engines.workload import tutorial_data as tutorial


@pytest.fixture(scope="module")
def ddp_run():
    """A real gloo run of 4 ranks training the MLP with a tiny bucket cap: one bucket in step 0, several
    once DDP rebuilds them; 96 rows make 3 steps of 8 rows a rank."""
    return record(RunConfig(engine="ddp", gpus=4, train=True, model="mlp", bucket_cap_mb=0.0001, data_size=96,
                            batch_size=32))


def _tracks(events):
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}


def test_ddp_has_one_process_per_rank_with_compute_and_all_reduce_tracks_never_overlapping(ddp_run):
    events = json.loads(chrome_trace.dumps(ddp_run))["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert processes == {lane.id: lane.name for lane in ddp_run.lanes}
    tracks = _tracks(events)
    for rank in range(4):
        assert tracks[(rank, ddp_chrome.COMPUTE_TID)].startswith("compute")
        assert tracks[(rank, ddp_chrome.ALLREDUCE_TID)] == "all-reduce (gloo)"
    by_track = defaultdict(list)
    for event in (e for e in events if e["ph"] == "X"):
        assert (event["pid"], event["tid"]) in tracks and isinstance(event["ts"], int) and event["dur"] >= 0
        on_allreduce_track = tracks[(event["pid"], event["tid"])].startswith("all-reduce")
        assert on_allreduce_track == (event["cat"] == "allreduce")
        by_track[(event["pid"], event["tid"])].append((event["ts"], event["ts"] + event["dur"]))
    for track in by_track.values():
        track.sort()
        assert all(end <= next_start for (_, end), (next_start, _) in zip(track, track[1:]))
    # Every span is exported once, on its own rank.
    exported = sorted((e["pid"], e["cat"], e["args"]["step"]) for e in events if e["ph"] == "X")
    assert exported == sorted((s.lane, s.phase, s.batch) for s in ddp_run.spans)


def test_all_reduce_events_name_their_buckets_parameters_and_bytes(ddp_run):
    events = [e for e in chrome_trace.to_chrome_trace(ddp_run)["traceEvents"] if e.get("cat") == "allreduce"]
    layouts = ddp_run.facts["ddp"]["buckets"]
    model, _ = tutorial.build(ddp_run.config)
    parameter_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    assert {e["args"]["step"] for e in events} == {0, 1, 2} and len({e["pid"] for e in events}) == 4
    for step in range(3):
        layout = [lay for lay in layouts if lay["step"] <= step][-1]["buckets"]
        for rank in range(4):
            mine = [e["args"] for e in events if e["args"]["step"] == step and e["pid"] == rank]
            # Every bucket of the layout in effect is all-reduced once, and together they hold every parameter.
            assert sorted(a["bucket"] for a in mine) == [b["index"] for b in layout]
            assert sum(a["bytes"] for a in mine) == parameter_bytes
            for args in mine:
                bucket = layout[args["bucket"]]
                assert (args["params"], args["bytes"]) == (bucket["params"], bucket["bytes"])
    assert len([lay for lay in layouts if lay["step"] <= 0][-1]["buckets"]) == 1  # DDP's first step: one bucket
    assert any(len(lay["buckets"]) > 1 for lay in layouts)  # rebuilt into several under the tiny cap


def test_ddp_export_is_streamed_and_the_same_from_a_loaded_file(ddp_run):
    text = chrome_trace.dumps(ddp_run)
    assert text == json.dumps(chrome_trace.to_chrome_trace(ddp_run), separators=(",", ":"))
    # A file keeps times to the microsecond or so: the events are the same but for a microsecond of rounding.
    loaded = json.loads(chrome_trace.dumps(trace_json.loads(trace_json.dumps(ddp_run))))["traceEvents"]
    events = json.loads(text)["traceEvents"]
    untimed = lambda e: {k: v for k, v in e.items() if k not in ("ts", "dur")}
    assert sorted(map(json.dumps, map(untimed, loaded))) == sorted(map(json.dumps, map(untimed, events)))
    starts = lambda es: sorted(e["ts"] for e in es if e["ph"] == "X")
    assert all(abs(a - b) <= 1 for a, b in zip(starts(loaded), starts(events)))


def test_overlapping_all_reduces_go_on_a_second_track_of_their_rank(ddp_run):
    import dataclasses

    first = next(s for s in ddp_run.spans if s.phase == "allreduce" and s.lane == 0)
    late = dataclasses.replace(first, group=first.group, start=first.start + (first.end - first.start) / 2,
                               end=first.end + 0.01)
    trace = dataclasses.replace(ddp_run, spans=[*ddp_run.spans, late])
    events = chrome_trace.to_chrome_trace(trace)["traceEvents"]
    tracks = _tracks(events)
    placed = {e["tid"] for e in events if e.get("cat") == "allreduce" and e["pid"] == 0
              and e["ts"] in (round(first.start * 1e6), round(late.start * 1e6))}
    assert len(placed) == 2 and all(tracks[(0, tid)].startswith("all-reduce (gloo)") for tid in placed)
