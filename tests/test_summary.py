"""Key figures and per-batch tables: checked against torch.chunk's split (dpviz.engines.dp.chunking.chunk_sizes)."""
import dataclasses
import math
import re

import pytest

from dpviz.engines.dp.chunking import chunk_sizes
from dpviz.analysis.summary import key_figures, summary_table
from dpviz.engines.dp.read.summary import summarize
from dpviz.analysis.batch_facts import MemoryPeak, batch_spans, chunks_per_batch, memory_peaks
from dpviz.analysis.tables import batch_split, memory_totals, phase_table, split_table
from figure_traces import recorded


def test_tutorial_on_eight_gpus():
    s = summarize(recorded(gpus=8))
    assert (s.batches, s.rows, s.devices) == (4, 100, 8)
    assert s.replicas_per_batch == [8, 8, 8, 5]  # 10 rows on 8 GPUs use 5
    assert s.replicas_total == 29
    assert s.idle_slots == 3 and s.batches_with_idle == 1 and s.device_slots == 32
    assert (s.largest_chunk, s.smallest_chunk) == (4, 2)
    assert s.simulated and s.backend == "simulated" and s.output_device == 0


def test_tutorial_on_three_gpus():
    s = summarize(recorded(gpus=3))
    assert s.replicas_per_batch == [3, 3, 3, 3]
    assert s.idle_slots == 0
    assert (s.largest_chunk, s.smallest_chunk) == (10, 2)  # 30 -> 10,10,10; 10 -> 4,4,2


@pytest.mark.parametrize("gpus", [1, 2, 3, 8, 16])
def test_chunks_match_torch_chunk(gpus):
    trace = recorded(gpus=gpus, data_size=100, batch_size=30)
    assert chunks_per_batch(trace) == [tuple(chunk_sizes(b.rows, gpus)) for b in trace.batches]


def test_split_table_has_a_row_per_batch_and_device_and_sums_to_the_batch():
    trace = recorded(gpus=8)
    table = split_table(trace)
    assert len(table) == 4 * 8
    sums = table.groupby("batch")["rows"].sum().tolist()
    assert sums == [b.rows for b in trace.batches]
    last = table[table["batch"] == 3]
    assert last["used"].tolist() == [True] * 5 + [False] * 3
    assert last.loc[last["used"], "first_row"].tolist() == [0, 2, 4, 6, 8]
    assert last.loc[last["used"], "last_row"].tolist() == [1, 3, 5, 7, 9]
    assert last.loc[~last["used"], "forward_ms"].isna().all()


def test_batch_split_equals_the_split_table_rows_of_that_batch():
    trace = recorded(gpus=3)
    whole = split_table(trace)
    for b in range(len(trace.batches)):
        one = batch_split(trace, b)
        part = whole[whole["batch"] == b].reset_index(drop=True)
        assert one.drop(columns="forward_ms").equals(part.drop(columns="forward_ms"))


def test_phase_times_add_up_the_spans():
    trace = recorded(gpus=8)
    phases = phase_table(trace).set_index("phase")
    assert list(phases.index) == ["scatter", "replicate", "apply", "forward", "gather"]
    forwards = [s for s in trace.spans if s.phase == "forward"]
    assert phases.loc["forward", "spans"] == 29
    assert math.isclose(phases.loc["forward", "total_s"], sum(s.duration for s in forwards))
    assert math.isclose(phases.loc["forward", "mean_s"], sum(s.duration for s in forwards) / 29)
    s = summarize(trace)
    assert s.phase_total_s["scatter"] == pytest.approx(phases.loc["scatter", "total_s"])
    assert s.phase_mean_s["gather"] == pytest.approx(phases.loc["gather", "mean_s"])


def test_single_device_has_no_replicate_or_gather():
    s = summarize(recorded(gpus=1))
    assert s.replicas_per_batch == [1, 1, 1, 1] and s.idle_slots == 0
    assert "replicate" not in s.phase_total_s and "gather" not in s.phase_total_s


def test_summary_table_states_the_key_figures():
    table = summary_table(recorded(gpus=8)).set_index("key figure")["value"]
    assert table["batches"] == "4 (100 rows)"
    assert table["replica calls"] == "29 in total; per batch: 8 in 3 batches, 5 in 1 batch"
    assert table["GPU turns left idle"] == "3 of 32 (1 batch with an idle GPU)"
    assert table["largest chunk"] == "4 rows" and table["smallest chunk"] == "2 rows"
    assert "simulated" in table["devices"]
    assert {"time in scatter", "time in replicate", "time in forward", "time in gather", "run time"} <= set(table.index)


def test_key_figures_headline_the_run():
    figures = key_figures(recorded(gpus=8))
    assert list(figures) == ["batches", "replica calls (one per busy GPU per batch)", "GPU turns left idle (GPUs × batches)",
                             "most rows one GPU got", "fewest rows one GPU got", "time inside DataParallel",
                             "memory peak, GPU 0", "GPU 0's peak over any other GPU's"]
    assert figures["batches"] == "4" and figures["replica calls (one per busy GPU per batch)"] == "29"
    assert figures["GPU turns left idle (GPUs × batches)"] == "3 of 32"
    assert figures["most rows one GPU got"] == "4 rows" and figures["fewest rows one GPU got"] == "2 rows"
    assert re.fullmatch(r"[0-9.,]+ ms", figures["time inside DataParallel"])
    assert len(figures["time inside DataParallel"].split()[0].replace(",", "").replace(".", "").lstrip("0")) <= 3
    assert key_figures(recorded(gpus=3))["GPU turns left idle (GPUs × batches)"] == "0 of 12"
    assert key_figures(recorded(gpus=4, data_size=95, batch_size=30))["fewest rows one GPU got"] == "1 row"


def test_memory_totals_and_peaks_come_from_the_samples():
    trace = recorded(gpus=3, train=True)
    totals = memory_totals(trace)
    assert len(totals) == 2 * 8 * 3  # two sampled batches, eight phases, three devices (empty ones as 0)
    for row in totals.itertuples():
        assert row.bytes == sum(m.bytes for m in trace.memory
                                if (m.batch, m.phase, m.lane) == (row.batch, row.phase, row.device))
    assert totals[(totals["phase"] == "step") & (totals["device"] > 0)]["bytes"].tolist() == [0, 0, 0, 0]
    first, other = memory_peaks(trace)
    assert first == MemoryPeak(0, 1260, 0, "backward") and other == MemoryPeak(1, 456, 0, "backward")
    assert memory_peaks(recorded(gpus=1, train=True))[1] is None
    assert memory_peaks(dataclasses.replace(trace, memory=[])) is None


def test_memory_key_figure_and_table_row():
    trace = recorded(gpus=3, train=True)
    assert key_figures(trace)["memory peak, GPU 0"] == "1.23 KiB"
    assert key_figures(trace)["GPU 0's peak over any other GPU's"] == "2.8×"
    assert "GPU 0's peak over any other GPU's" not in key_figures(recorded(gpus=1, train=True))
    assert key_figures(recorded(gpus=1, train=True))["memory peak, GPU 0"].endswith("KiB")
    assert "memory peak, GPU 0" not in key_figures(dataclasses.replace(trace, memory=[]))
    table = summary_table(trace).set_index("key figure")["value"]
    assert table["peak memory"] == ("GPU 0: 1.23 KiB after backward of batch 1; other GPUs at most 456 B "
                                    "(GPU 1, after backward) (computed from tensor sizes)")
    assert table["time in backward"].endswith("(all replicas)") and table["time in step"].endswith("(device_ids[0])")


def test_training_phases_in_pipeline_order_and_spans_per_batch():
    trace = recorded(gpus=3, train=True)
    assert list(phase_table(trace)["phase"]) == ["scatter", "replicate", "apply", "forward", "gather", "loss",
                                                 "backward", "reduce", "step"]
    assert [s.replica for s in batch_spans(trace, 3, "backward")] == [0, 1, 2]
    assert [s.rows for s in batch_spans(trace, 3, "backward")] == [4, 4, 2]
    assert [s.lane for s in batch_spans(trace, 3, "step")] == [0]


# DistributedDataParallel: key figures from a real DDP run.

def test_ddp_key_figures_are_ranks_rows_per_rank_padding_and_buckets():
    from ddp_traces import ddp_trace
    from dpviz.engines.ddp.read.tables import bucket_layouts

    trace = ddp_trace("four_train")
    figures = key_figures(trace)
    layouts = bucket_layouts(trace)
    assert figures["ranks (processes)"] == "4" and figures["steps"] == "3"
    assert figures["rows per rank per step"] == "8 (global 32)"
    assert figures["rows loaded again"] == "2 (padding)"
    assert figures["buckets (step 1, then rebuilt)"] == f"1, then {len(layouts[1]['buckets'])}"
    # Collectives, one per bucket per step (step 0 had one bucket, the others the rebuilt layout), not × ranks.
    collectives = sum(len(lay["buckets"]) * len([b for b in trace.batches if b.index >= lay["step"]
                                                 and (nxt is None or b.index < nxt["step"])])
                      for lay, nxt in zip(layouts, layouts[1:] + [None]))
    assert figures["bucket all-reduces"] == f"{collectives}"
    assert sum(s.phase == "allreduce" for s in trace.spans) == collectives * 4
    assert figures["all-reduce during backward's compute"].endswith("%")
    assert figures["memory peak, every rank"].endswith("KiB")
    assert all(len(value) <= 14 for value in figures.values()), figures  # a metric cuts longer values
    assert not any("GPU" in k or "GPU" in v or "replica" in k for k, v in figures.items())
    forward = key_figures(ddp_trace("four_forward"))
    assert forward["rows per rank per step"] == "8 (global 32)" and not any("bucket" in k for k in forward)
    assert key_figures(ddp_trace("two_accumulate"))["steps under no_sync"] == "2 of 4"


def test_ddp_summary_table_says_what_ran_and_times_every_phase():
    from ddp_traces import ddp_trace

    trace = ddp_trace("two_train")
    table = dict(summary_table(trace).itertuples(index=False))
    assert table["engine"] == "DistributedDataParallel: 2 ranks, each its own process (on the CPU, gloo, no GPU)"
    assert table["global batch"].startswith("up to 30 rows per step")
    assert table["rows loaded again"] == "1 (DistributedSampler's padding)"
    assert "time-sharing the CPU's cores" in table["all-reduce beside backward"]
    for phase in {s.phase for s in trace.spans}:
        assert f"time in {phase}" in table
    assert "output device" not in table and "replica calls" not in table


@pytest.mark.parametrize("settings", [dict(gpus=2), dict(gpus=8, train=True), dict(gpus=5, model="mlp", train=True),
                                      dict(gpus=3, data_size=95, batch_size=30)])
def test_memory_peaks_are_the_maxima_of_memory_totals(settings):
    trace = recorded(**settings)
    totals = memory_totals(trace)
    first = trace.lanes[0].id
    for peak, part in zip(memory_peaks(trace), (totals[totals["device"] == first], totals[totals["device"] != first])):
        row = part.loc[part["bytes"].idxmax()]  # the first of equal maxima in the table's pipeline order
        assert peak == MemoryPeak(int(row["device"]), int(row["bytes"]), int(row["batch"]), str(row["phase"]))


def test_replicas_called_with_no_rows_are_calls_not_idle_gpus():
    from dpviz import record
    from dpviz.presets import PRESETS

    trace = record(PRESETS["kwargs-small-batch"].config)  # 8 GPUs, the last batch's x makes only 5 chunks
    figures = key_figures(trace)
    assert figures["replicas called with no rows"] == "3"  # replicas 5-7, called with scale alone
    # 8 GPUs' replicas got rows in 3 batches, 5 in the last: the 3 called with no rows did no work on it
    assert figures["replica calls (one per busy GPU per batch)"] == "29"
    assert figures["GPU turns left idle (GPUs × batches)"] == "0 of 32"  # called, so not idle either
    s = summarize(trace)
    assert s.replicas_total + s.called_without_rows + s.idle_slots == s.device_slots
    assert "replicas called with no rows" not in key_figures(recorded(gpus=8))  # idle GPUs there are truly idle
