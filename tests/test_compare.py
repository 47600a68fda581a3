"""The DataParallel / DDP comparison, computed from two real runs on the same settings."""
from __future__ import annotations

import functools

import pytest

from dpviz.compare import comparison, model_bytes, per_device, step_seconds, traffic
from dpviz.config import RunConfig
from dpviz.engines import engine
from dpviz.figures.style import unwrap  # titles read without the line breaks styled() wraps them with


@functools.cache
def runs(**settings):
    return engine("dp").record(RunConfig(**settings)), engine("ddp").record(RunConfig(engine="ddp", **settings))


def test_dataparallel_sends_chunks_and_model_copies_and_takes_back_outputs_and_gradients():
    dp, _ = runs(gpus=3, train=True)
    params, grads = model_bytes(dp)
    assert params == grads == (5 * 2 + 2) * 4  # nn.Linear(5, 2): no buffers
    for batch in dp.batches:
        moves = [m for m in traffic(dp) if m.step == batch.index]
        replicas = dp.replicas(batch.index)
        others = [r for r in replicas if r.lane != 0]
        received = lambda what, lane: sum(m.received for m in moves if m.what == what and m.lane == lane)
        assert received("input chunk", 0) == 0 and sum(received("input chunk", r.lane) for r in others) \
            == sum(r.rows for r in others) * 5 * 4
        assert all(received("parameter copy", r.lane) == params for r in others)
        assert received("output gathered", 0) == sum(r.rows for r in others) * 2 * 4
        assert received("gradient sum", 0) == grads * len(others)
        assert sum(m.sent for m in moves) == sum(m.received for m in moves)  # point to point: what leaves arrives


def test_ddp_all_reduces_a_ring_share_of_the_gradients_on_every_rank():
    _, ddp = runs(gpus=4, train=True)
    _, grads = model_bytes(ddp)
    for batch in ddp.batches:
        moves = [m for m in traffic(ddp) if m.step == batch.index]
        assert sorted(m.lane for m in moves) == [0, 1, 2, 3]
        assert all(m.what == "all-reduce" and m.sent == m.received == round(2 * 3 / 4 * grads) for m in moves)


def test_forward_only_ddp_without_buffers_moves_nothing_while_dataparallel_still_copies_the_model():
    dp, ddp = runs(gpus=2)
    assert traffic(ddp) == []
    assert {m.what for m in traffic(dp)} == {"input chunk", "parameter copy", "output gathered"}


def test_per_device_figures_show_device_zero_carrying_dataparallel():
    dp, ddp = runs(gpus=4, train=True, model="mlp", data_size=96, batch_size=32)
    a, b = per_device(dp), per_device(ddp)
    assert a[0].bytes_per_step > 2 * max(f.bytes_per_step for f in a[1:])
    assert max(f.bytes_per_step for f in b) < a[0].bytes_per_step
    assert sum(f.rows for f in a) == sum(f.rows for f in b) == 96  # every row once: 96 divides evenly
    assert all(f.peak_memory for f in a + b) and a[0].peak_memory > max(f.peak_memory for f in a[1:])
    assert len({f.peak_memory for f in b}) == 1  # ranks hold the same


def test_the_sentences_quote_the_runs_numbers():
    dp, ddp = runs(gpus=4, train=True, model="mlp", data_size=96, batch_size=32)
    text = " ".join(comparison(dp, ddp))
    assert "GPU 0" in text and "no scatter, no replicate, no gather" in text and "(computed)" in text
    assert f"{sorted(step_seconds(dp))[len(dp.batches) // 2] * 1e3:.1f} ms" in text
    assert "handled 96 rows (96 distinct)" in text and "loaded 96 rows (96 distinct)" in text
    _, padded = runs(gpus=3, data_size=10, batch_size=6, shuffle=False)
    assert "loaded 12 rows (10 distinct: 2 loaded again)" in " ".join(comparison(runs(gpus=3, data_size=10, batch_size=6,
                                                                                      shuffle=False)[0], padded))


def test_the_comparison_figure_draws_each_engines_traffic_by_what_moves():
    from dpviz.figures.compare import comparison_figure

    dp, ddp = runs(gpus=4, train=True, model="mlp", data_size=96, batch_size=32)
    fig = comparison_figure(dp, ddp)
    left = {bar.name for bar in fig.data if bar.xaxis == "x"}
    right = {bar.name for bar in fig.data if bar.xaxis == "x2"}
    assert left == {"input chunk", "parameter copy", "output gathered", "output gradient", "sum of gradients"}  # the phase's own name
    assert right == {"all-reduce", "buffers"}  # BatchNorm's buffers, from rank 0
    gpu0 = sum(bar.y[list(bar.x).index("GPU 0")] for bar in fig.data if bar.xaxis == "x" and "GPU 0" in bar.x)
    assert gpu0 == pytest.approx(max(f.bytes_per_step for f in per_device(dp)), abs=1) and "GPU 0 moves" in unwrap(fig.layout.annotations[0].text)


def test_the_ddp_flow_shows_each_rank_reading_its_own_rows_into_one_all_reduce():
    from dpviz.figures.views import flow_any

    _, ddp = runs(gpus=4, train=True)
    for step in (0, len(ddp.batches) - 1):
        sankey = flow_any(ddp, step).data[0]
        labels = list(sankey.node.customdata)  # every node's words (its hover); only the rows' nodes print theirs
        forwards = sorted(ddp.spans_of(step, "forward"), key=lambda s: s.lane)
        assert [l for l in sankey.node.label if l] == labels[1:5]
        assert [labels[1 + i] for i in range(4)] == [f"rank {s.lane}: {s.rows} row{'s' if s.rows != 1 else ''}"
                                                     for s in forwards]
        assert labels.count("all-reduce (mean)") == 1 and not any("scatter" in l or "gather" in l for l in labels)
        assert list(sankey.link.value[:2]) == [forwards[0].rows] * 2  # rows read, then computed on rank 0
    _, forward_only = runs(gpus=2)
    assert "all-reduce (mean)" not in flow_any(forward_only, 0).data[0].node.customdata
