"""The Chrome Trace Event export: valid for Perfetto, one track per device, no overlaps on a track."""
import json
from collections import defaultdict

from dpviz import RunConfig, chrome_trace, record


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
