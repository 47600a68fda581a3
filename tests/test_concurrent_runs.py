"""Runs in threads of one process, as a hosted page's sessions are: each gets exactly what it gets alone."""
import threading
import warnings

import torch

from dpviz import RunConfig, record
from dpviz.engines.dp.workers import POOL
from dpviz.figures import split_figure
from dpviz.presets import PRESETS

CONFIGS = [
    PRESETS["scalar-loss"].config,  # warns on every batch, and records its losses
    RunConfig(gpus=3),  # the tutorial on 3 GPUs: no warning at all
    RunConfig(gpus=4, train=True, model="mlp", seed=3),
    PRESETS["state-lost"].config,
    PRESETS["kwargs-small-batch"].config,  # fails in a replica
]


def _what_happened(trace) -> tuple:
    """Everything a run decides, leaving out when things happened and on which thread."""
    spans = [(s.phase, s.batch, s.lane, s.replica, s.row_offset, s.rows, s.input_shape, s.output_shape) for s in trace.spans]
    return (trace.batches, trace.warnings, trace.failure, trace.facts, trace.arguments, trace.memory,
            sorted(spans, key=repr), split_figure(trace).to_json())


def test_concurrent_runs_match_solo_runs_and_leave_the_process_as_it_was():
    threads_before = threading.active_count() - POOL.idle()
    solo = [_what_happened(record(config)) for config in CONFIGS]
    filters, hook, rng = list(warnings.filters), warnings.showwarning, torch.get_rng_state()
    results: dict[tuple[int, int], tuple] = {}
    errors = []

    def session(round_: int, i: int) -> None:
        try:
            results[round_, i] = _what_happened(record(CONFIGS[i]))
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    for round_ in range(4):
        threads = [threading.Thread(target=session, args=(round_, i)) for i in range(len(CONFIGS))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not errors
    for (round_, i), got in results.items():
        assert got == solo[i], f"round {round_}: {CONFIGS[i]} differs from its solo run"
    assert solo[0][1][0].count == 4 and solo[1][1] == []  # a warning per batch, and none for the tutorial
    assert list(warnings.filters) == filters and warnings.showwarning is hook
    assert torch.equal(torch.get_rng_state(), rng)
    # The replica threads sessions borrowed went back to one shared, bounded pool: four rounds of five
    # sessions leave no more idle threads than the pool keeps, however many calls they made.
    assert POOL.idle() <= POOL.max_idle
    assert threading.active_count() <= threads_before + POOL.max_idle
