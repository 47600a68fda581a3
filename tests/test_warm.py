"""A process kept for one caller's runs: each run in it records what the same run records in a process of its own,
the process serves one run after another, and it ends when a run is left mid-way, when it has waited its idle
limit, and when it is closed, saying so once each time."""
from __future__ import annotations

import time

import pytest

from dpviz.config import RunConfig
from dpviz.engines.apart import RunFailed, record_apart
from dpviz.engines.processes import forkserver_pid
from dpviz.engines.warm import WarmProcess
from dpviz.host_memory import parent
from dpviz.presets import PRESETS

from budget import limit
from processes import identity, running, wait_for

CONFIGS = [
    RunConfig(gpus=3),  # the tutorial on 3 GPUs
    PRESETS["scalar-loss"].config,  # warns on every batch, and records its losses
    RunConfig(gpus=4, train=True, model="mlp", seed=3),
    PRESETS["kwargs-small-batch"].config,  # fails in a replica
]


def _what_happened(trace) -> tuple:
    """Everything a run decides, leaving out when things happened and on which thread."""
    spans = [(s.phase, s.batch, s.lane, s.replica, s.row_offset, s.rows, s.input_shape, s.output_shape) for s in trace.spans]
    return trace.batches, trace.warnings, trace.failure, trace.facts, trace.arguments, trace.memory, sorted(spans, key=repr)


def _ended(process: tuple[int, int], ends: list, times: int = 1) -> bool:
    """Wait (generously) until `process` has gone and its end has been told `times` times in all, no more."""
    wait_for(lambda: not running(process) and len(ends) >= times, time.monotonic() + limit(starts=1))
    time.sleep(0.2)  # a second word about the same end would come about now
    return not running(process) and len(ends) == times


def test_runs_in_a_kept_process_record_what_their_own_processes_do_one_after_another_in_one_process():
    ends = []
    warm = WarmProcess(on_end=lambda: ends.append(1))
    try:
        pids = set()
        for config in CONFIGS:
            alone = record_apart(config)
            kept = warm.record(config)
            pids.add(warm.pid)
            assert _what_happened(kept) == _what_happened(alone), config
            assert len(kept.spans) == len(alone.spans) > 0
        assert len(pids) == 1 and parent(pids.pop()) == forkserver_pid()  # one process, a fork of the forkserver
        assert not ends
    finally:
        warm.close()


def test_a_run_left_before_it_answers_ends_the_process_and_the_next_run_starts_a_fresh_one():
    ends = []
    warm = WarmProcess(on_end=lambda: ends.append(1))
    try:
        warm.record(RunConfig(gpus=2))
        first = identity(warm.pid)

        def closed_tab() -> None:
            raise KeyboardInterrupt  # what the page's check raises is the page's; any exception leaves the run

        with pytest.raises(KeyboardInterrupt):
            warm.record(RunConfig(gpus=5), still_wanted=closed_tab)
        assert warm.pid is None and _ended(first, ends)
        trace = warm.record(RunConfig(gpus=5))
        assert trace.lanes and identity(warm.pid) != first
    finally:
        warm.close()


def test_a_kept_process_leaves_by_itself_after_its_idle_limit_and_the_next_run_starts_a_fresh_one():
    ends = []
    warm = WarmProcess(idle_s=1.5, on_end=lambda: ends.append(1))
    try:
        warm.record(RunConfig(gpus=2))
        first = identity(warm.pid)
        assert _ended(first, ends)
        assert not warm.alive()
        warm.record(RunConfig(gpus=2))
        assert identity(warm.pid) != first
    finally:
        warm.close()


def test_closing_ends_the_process_once_and_an_idle_one_only_while_nothing_runs():
    ends = []
    warm = WarmProcess(on_end=lambda: ends.append(1))
    assert not warm.close_if_idle()  # nothing started yet
    warm.record(RunConfig(gpus=2))
    first = identity(warm.pid)
    assert warm.close_if_idle() and _ended(first, ends)
    warm.record(RunConfig(gpus=2))
    second = identity(warm.pid)
    warm.close()
    warm.close()
    assert _ended(second, ends, times=2)


def test_a_run_that_raises_in_the_kept_process_fails_and_leaves_it_for_the_next_run():
    warm = WarmProcess()
    try:
        warm.record(RunConfig(gpus=2))
        pid = warm.pid
        with pytest.raises(RunFailed) as failure:
            # CUDA asked for where torch has none: torch raises in the kept process
            warm.record(RunConfig(gpus=2, backend="cuda"), machine_gpus=2)
        assert failure.value.kind != "ProcessExited"
        assert warm.pid == pid and warm.record(RunConfig(gpus=3)).lanes
    finally:
        warm.close()
