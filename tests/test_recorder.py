"""record(config) -> Trace: what every batch and replica received, checked against torch.chunk."""
import json

import pytest
import torch

from dpviz.engines.dp.workers import POOL

from dpviz import ConfigError, RunConfig, record, resolve_backend
from dpviz.trace import json_io as trace_json
from dpviz.engines.dp.vocabulary import VOCABULARY

HOST_PHASES = VOCABULARY.where("host")


def test_every_row_lands_in_exactly_one_batch_and_one_replica():
    trace = record(RunConfig(data_size=100, batch_size=30, gpus=3))
    assert [b.rows for b in trace.batches] == [30, 30, 30, 10]
    assert sorted(i for b in trace.batches for i in b.sample_ids) == list(range(100))
    for batch in trace.batches:
        ids = torch.tensor(batch.sample_ids)
        expected = [c.tolist() for c in ids.chunk(3)]
        assert [trace.sample_ids(s) for s in trace.replicas(batch.index)] == expected
        assert [s.lane for s in trace.replicas(batch.index)] == list(range(len(expected)))


@pytest.mark.parametrize("rows,gpus", [(10, 8), (4, 8), (30, 8), (13, 6), (1, 4)])
def test_replicas_follow_torch_chunk_including_idle_devices(rows, gpus):
    trace = record(RunConfig(data_size=rows, batch_size=rows, gpus=gpus))
    expected = [c.shape[0] for c in torch.empty(rows).chunk(gpus)]
    replicas = trace.replicas(0)
    assert [s.rows for s in replicas] == expected
    assert [s.input_shape for s in replicas] == [[n, 5] for n in expected]
    assert [s.output_shape for s in replicas] == [[n, 2] for n in expected]
    assert sorted(s.order for s in replicas) == list(range(len(expected)))


def test_phases_are_timed_in_order_and_replicas_run_inside_apply():
    trace = record(RunConfig(gpus=4))
    for batch in trace.batches:
        host = trace.host_spans(batch.index)
        assert list(host) == list(HOST_PHASES)
        for first, then in zip(HOST_PHASES, HOST_PHASES[1:]):
            assert host[first].end <= host[then].start
        for replica in trace.replicas(batch.index):
            assert host["apply"].start <= replica.start <= replica.end <= host["apply"].end
            assert replica.thread != "MainThread"  # parallel_apply gives each replica a thread


def test_a_single_device_is_a_direct_call():
    trace = record(RunConfig(gpus=1))
    for batch in trace.batches:
        assert list(trace.host_spans(batch.index)) == ["scatter"]  # torch scatters, then calls the module
        (replica,) = trace.replicas(batch.index)
        assert replica.rows == batch.rows and replica.thread == "MainThread"


def test_same_seed_same_run_other_seed_other_order():
    first, again = record(RunConfig(seed=7)), record(RunConfig(seed=7))
    other = record(RunConfig(seed=8))
    assert [b.sample_ids for b in first.batches] == [b.sample_ids for b in again.batches]
    assert [b.sample_ids for b in first.batches] != [b.sample_ids for b in other.batches]


def test_no_shuffle_keeps_dataset_order():
    trace = record(RunConfig(shuffle=False, data_size=25, batch_size=10))
    assert [b.sample_ids for b in trace.batches] == [list(range(0, 10)), list(range(10, 20)), list(range(20, 25))]


def test_trace_says_what_produced_it():
    trace = record(RunConfig(gpus=3))
    assert trace.backend == "simulated" and trace.simulated
    assert trace.torch_version == torch.__version__
    assert [lane.name for lane in trace.lanes] == [f"simulated device {i}" for i in range(3)]


def test_trace_says_simulated_replicas_reuse_their_threads():
    """facts["threads"]: the simulation borrows replica threads from a pool, so the same threads run the
    replicas of batch after batch (real DataParallel starts new ones); the fact survives the file."""
    trace = record(RunConfig(gpus=4, data_size=120, batch_size=30))
    assert trace.facts["threads"] == "reused"
    threads = [{s.thread for s in trace.replicas(b.index)} for b in trace.batches]
    at_once = trace.facts["threads_at_once"]
    assert at_once == POOL.at_once(4)
    assert all(len(t) == at_once for t in threads)  # as many threads as the trace says, one per core at most
    for batch in trace.batches:  # replica i on thread i mod that number, never the caller's
        on = {s.replica: s.thread for s in trace.replicas(batch.index)}
        assert all(on[i] == on[i % at_once] for i in on) and "MainThread" not in on.values()
    assert set.intersection(*threads)  # and the same threads from call to call
    assert trace_json.loads(trace_json.dumps(trace)).facts == trace.facts


def test_a_loaded_trace_with_another_threads_fact_is_refused():
    data = json.loads(trace_json.dumps(record(RunConfig(gpus=2))))
    data["facts"]["threads"] = "per call"
    with pytest.raises(trace_json.TraceError, match="facts threads must be one of reused"):
        trace_json.loads(json.dumps(data))


def test_progress_reaches_the_total():
    seen = []
    record(RunConfig(data_size=1000, batch_size=7), progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (143, 143) and all(a < b for (a, _), (b, _) in zip(seen, seen[1:]))


@pytest.mark.parametrize("backend,gpus,available,expected", [
    ("auto", 2, 0, "simulated"), ("auto", 2, 2, "cuda"), ("auto", 8, 4, "simulated"), ("auto", 1, 8, "simulated"),
    ("simulated", 2, 8, "simulated"), ("cuda", 2, 2, "cuda"), ("cuda", 1, 1, "cuda"),
])
def test_backend_choice(backend, gpus, available, expected):
    assert resolve_backend(RunConfig(backend=backend, gpus=gpus), available) == expected


def test_cuda_without_enough_gpus_is_a_clear_error():
    with pytest.raises(ConfigError, match="needs 4 CUDA devices but this machine has 1"):
        resolve_backend(RunConfig(backend="cuda", gpus=4), available=1)
