"""Per-session runs: reruns come from memory, the store stays bounded, impossible backends fall back."""
from dpviz import RunConfig, record
from dpviz.engines.run import runnable
from dpviz.page.session import Runs
from dpviz.analysis.wording import describe_devices


def test_same_settings_rerun_from_memory_and_the_store_is_bounded():
    runs = Runs(capacity=2)
    first = runs.get(RunConfig(gpus=2))
    assert runs.get(RunConfig(gpus=2)) is first
    runs.get(RunConfig(gpus=3))
    runs.get(RunConfig(gpus=4))
    assert RunConfig(gpus=2) not in runs and RunConfig(gpus=4) in runs


def test_sessions_do_not_share_runs():
    mine, theirs = Runs(), Runs()
    trace = mine.get(RunConfig(gpus=5))
    assert RunConfig(gpus=5) not in theirs
    assert theirs.get(RunConfig(gpus=5)) is not trace


def test_cuda_without_gpus_falls_back_to_simulated_with_a_reason():
    config, reason = runnable(RunConfig(backend="cuda", gpus=4), available=1)
    assert config == RunConfig(backend="simulated", gpus=4)
    assert reason == "backend cuda needs 4 CUDA devices but this machine has 1, so simulated devices are shown instead."
    assert runnable(RunConfig(backend="auto", gpus=4), available=0) == (RunConfig(backend="auto", gpus=4), None)


def test_device_sentence_says_simulated_and_counts(monkeypatch):
    from dpviz.engines.dp.workers import POOL

    monkeypatch.setattr(POOL, "threads", 8)  # a machine with a core per device
    text = describe_devices(record(RunConfig(gpus=8)), machine_gpus=0)
    assert text.startswith("Simulated devices: 8 CPU threads stand in for 8 GPUs") and "has 0 CUDA GPUs" in text
    monkeypatch.setattr(POOL, "threads", 2)  # two cores: the replicas took turns on two threads, and it says so
    text = describe_devices(record(RunConfig(gpus=8)), machine_gpus=0)
    assert text.startswith("Simulated devices: 8 GPUs, whose replicas took turns on 2 CPU threads (one per core)")


def test_views_are_built_once_per_trace_and_argument_and_old_traces_are_let_go():
    from dpviz.page.session import Views

    calls = []

    def build(trace, batch=0):
        calls.append((trace, batch))
        return object()

    views = Views(traces=2)
    first, second, third = (record(RunConfig(gpus=g)) for g in (2, 3, 4))
    figure = views.get(first, build, 1)
    assert views.get(first, build, 1) is figure and len(calls) == 1
    views.get(first, build, 2)
    views.get(second, build, 1)
    assert views.get(first, build, 2) is not None and len(calls) == 3  # both traces still remembered
    views.get(third, build, 1)  # a third trace: the least recently shown (second) is let go
    views.get(second, build, 1)
    assert len(calls) == 5 and calls[-1] == (second, 1)


def test_auto_and_the_backend_it_picks_are_one_run():
    runs = Runs()
    trace = runs.get(RunConfig(backend="auto", gpus=2))
    assert runs.get(RunConfig(backend="simulated", gpus=2)) is trace


def test_heavy_runs_are_not_kept_side_by_side(monkeypatch):
    import dpviz.page.session as session

    monkeypatch.setattr(session, "MAX_KEPT_SPANS", 200)
    runs = Runs(capacity=3)
    runs.get(RunConfig(gpus=2))  # 4 batches: light
    runs.get(RunConfig(gpus=3))
    assert RunConfig(gpus=2) in runs and RunConfig(gpus=3) in runs
    runs.get(RunConfig(gpus=16, data_size=300, batch_size=30))  # 10 batches x 22 spans: heavy
    assert RunConfig(gpus=2) not in runs and RunConfig(gpus=3) not in runs


def test_pages_draw_one_at_a_time_only_while_pandas_may_be_half_imported(monkeypatch):
    import sys
    import threading
    import types

    from dpviz.page import session

    def others_can_draw() -> bool:  # whether another session's thread gets the lock while this one draws
        got = []

        def other() -> None:
            got.append(session.DRAWING.acquire(timeout=0.2))
            if got[0]:
                session.DRAWING.release()

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        return got[0]

    half = types.ModuleType("pandas")
    half.__spec__ = types.SimpleNamespace(_initializing=True)  # what importlib shows while it runs pandas
    monkeypatch.setitem(sys.modules, "pandas", half)
    with session.drawing():
        assert not others_can_draw()
    half.__spec__._initializing = False  # pandas whole: no one imports it again
    with session.drawing():
        assert others_can_draw()
