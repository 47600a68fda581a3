"""The explanation is derived from the trace: other settings, other numbers and other words."""
import pytest

from dpviz import RunConfig, record
from dpviz.analysis.explain import explain
from figure_traces import as_cuda, recorded


def text(**settings) -> str:
    return "\n".join(explain(recorded(**settings)))


def test_returns_short_markdown_paragraphs():
    paragraphs = explain(recorded(gpus=8))
    assert len(paragraphs) >= 5
    assert all(isinstance(p, str) and p.startswith("**") and "\n" not in p for p in paragraphs)


def test_ten_rows_on_three_gpus_split_4_4_2():
    t = text(gpus=3, data_size=10, batch_size=10)
    assert "splits 4, 4, 2" in t
    assert "ceil(10/3) = 4 rows" in t
    assert "not the even 4, 3, 3" in t
    assert "idle" not in t.lower()


def test_tutorial_last_batch_on_three_gpus():
    t = text(gpus=3)
    assert "batches 1-3 (30 rows each) split 10, 10, 10" in t  # counted from 1, as a reader counts them
    assert "batch 4 (10 rows) splits 4, 4, 2" in t
    assert "drop_last=False" in t  # why the last batch is short


def test_ten_rows_on_eight_gpus_leave_three_idle():
    t = text(gpus=8, data_size=10, batch_size=10)
    assert "ceil(10/8) = 2 rows" in t
    assert "only 5 chunks (2, 2, 2, 2, 2)" in t
    assert "GPUs 5, 6 and 7 sit idle" in t
    assert "3 of 8 GPU slots" in t


def test_numbers_follow_the_configuration():
    t = text(gpus=6, data_size=13, batch_size=13)
    assert "splits 3, 3, 3, 3, 1" in t and "GPU 5 sits idle" in t and "1 of 6 GPU slots" in t
    assert "One-row chunks" in t and "GPU 4 a single row" in t
    assert text(gpus=8) != text(gpus=3) != text(gpus=2)


def test_fewer_rows_than_gpus():
    t = text(gpus=16, data_size=10, batch_size=3, shuffle=False)
    assert "3 rows make only 3 chunks for 16 GPUs" in t
    assert "GPUs 3-15 sit idle" in t
    assert "consecutive dataset rows, because shuffle=False" in t


def test_output_device_carries_more():
    t = text(gpus=8)
    assert "Why GPU 0 carries more" in t and "up to 30 × 2" in t


def test_simulated_or_real():
    assert "**Simulated GPUs.**" in text(gpus=8)
    real = "\n".join(explain(as_cuda(recorded(gpus=8))))
    assert "**Real GPUs.**" in real and "NVIDIA H200" in real and "Simulated" not in real


def test_single_gpu_says_nothing_is_split():
    t = text(gpus=1)
    assert "does not split anything" in t and "no gather" in t
    assert "carries more" not in t and "Idle GPUs" not in t


def test_time_paragraph_uses_measured_phases():
    t = text(gpus=8)
    assert "Where the time went" in t and "replicate" in t and "CPU times" in t


def test_way_back_names_the_chunk_sizes_and_the_sum_on_gpu_zero():
    t = text(gpus=3, train=True)
    assert "**The way back.**" in t
    assert "10, 10, 10 rows in batches 1-3; 4, 4, 2 rows in batch 4" in t
    assert "**sums** the 3 replicas' gradients onto GPU 0" in t and "not an average" in t
    assert "optimizer step then runs on GPU 0" in t and "one after another on the CPU autograd thread" in t
    eight = text(gpus=8, train=True)
    assert "2, 2, 2, 2, 2 rows in batch 4" in eight and "(8 in batches 1-3, 5 in batch 4)" in eight
    assert "way back" not in text(gpus=3)  # forward only
    assert "nothing is split and nothing is summed" in text(gpus=1, train=True)
    real = "\n".join(explain(as_cuda(recorded(gpus=3, train=True))))
    assert "**The way back.**" in real and "autograd thread" not in real


def test_memory_paragraph_uses_the_samples():
    t = text(gpus=3, train=True)
    assert "GPU 0 peaks at 1.23 KiB after the backward of batch 1" in t
    assert "no other GPU holds more than 456 B (GPU 1, after backward), so GPU 0 needs 2.8× as much" in t
    assert "the whole batch (600 B, where the others hold at most 200 B)" in t
    assert "the summed gradients (48 B) and the optimizer state (48 B), which no other GPU ever holds" in t
    eight = text(gpus=8, train=True)
    assert "no other GPU holds more than 240 B" in eight and "5.0× as much" in eight
    forward = text(gpus=2)
    assert "peaks at 1,008 B after the gather of batch 1" in forward and "the gathered output (240 B)" in forward
    assert "loss" not in forward.split("How much more")[1].split("**")[1]
    assert "How much more" not in text(gpus=1)


def test_pitfall_explanations_hold_for_the_edge_cases():
    from dpviz.presets import PRESETS

    first = " ".join(explain(record(RunConfig(inputs="kwargs", gpus=16))))  # 30 rows make 15 chunks: the first batch fails
    assert "in its first batch" in first and "earlier batches worked" not in first
    assert "a multiple of 16 rows" in first
    loss = " ".join(explain(record(RunConfig(model="loss", gpus=3, train=True))))
    assert "MSE" not in loss and "mean of the gathered per-GPU losses" in loss
    hidden = " ".join(explain(record(PRESETS["rnn-hidden-dim"].config)))
    assert "multiple of" not in hidden  # h0, not the batch size, left GPU 1 idle
    assert "(up to" not in hidden  # no batch produced an output
    one = " ".join(explain(record(RunConfig(model="mlp", batch_size=1, data_size=3, gpus=4))))
    assert "one GPU would fail too" in one
    image = " ".join(explain(record(RunConfig(model="cnn", input_size=1, gpus=4, data_size=95))))
    assert "BatchNorm2d in training mode" in image
    failed_training = " ".join(explain(record(PRESETS["batchnorm-one-row"].config)))
    assert "rows in batch 4" not in failed_training  # the way back leaves out the batch that never got to its loss


# DistributedDataParallel: the explanation of a real DDP run, every number from its trace.

def ddp_text(name: str) -> str:
    from ddp_traces import ddp_trace

    return "\n".join(explain(ddp_trace(name)))


def test_ddp_explanation_names_ranks_as_processes_and_the_per_rank_batch_from_the_config():
    from ddp_traces import CONFIGS

    for name, config in CONFIGS.items():
        t = ddp_text(name)
        per_rank = -(-config.batch_size // config.gpus)
        assert f"ceil({config.batch_size}/{config.gpus}) = {per_rank} rows" in t, name
        assert f"DistributedDataParallel ran {config.gpus} ranks: {config.gpus} Python processes" in t
        assert "**Processes, not GPUs.**" in t and "Simulated" not in t and "simulated GPUs" not in t
        assert "scatter" in t and "**No scatter, no replicate, no gather.**" in t
        assert "**Why" not in t and "torch.chunk" not in t  # none of DataParallel's paragraphs
    forward = ddp_text("four_forward")  # 30 on 4 ranks: 8 each, 32 a step
    assert "a full step loads 4 × 8 = 32 rows, not 30" in forward
    assert "not 32" not in ddp_text("four_train") and "Together the 4 ranks load 32 rows a step" in ddp_text("four_train")


def test_ddp_explanation_names_the_rows_loaded_twice():
    from collections import Counter

    from ddp_traces import ddp_trace

    trace = ddp_trace("four_train")
    twice = sorted(r for r, n in Counter(i for b in trace.batches for i in b.sample_ids).items() if n > 1)
    t = ddp_text("four_train")
    assert f"dataset rows {twice[0]}, {twice[1]} were loaded a second time, in step 3 by ranks 2, 3" in t  # counted from 1
    assert "**Rows loaded twice.**" not in ddp_text("two_accumulate")  # 100 rows divide by 2


def test_ddp_explanation_tells_the_buckets_their_rebuild_and_the_overlap():
    from ddp_traces import ddp_trace
    from dpviz.echo import code_span
    from dpviz.engines.ddp.read.tables import bucket_layouts

    trace = ddp_trace("four_train")
    first, later = bucket_layouts(trace)[:2]
    t = ddp_text("four_train")
    assert f"In step 1 DDP had put all {len(first['buckets'][0]['params'])} parameter tensors" in t
    assert f"from step {later['step'] + 1} on, {len(later['buckets'])} buckets: bucket 0 " + code_span(later["buckets"][0]["params"][0]) in t
    assert "bucket_cap_mb=0.0002 caps a bucket at 209 bytes" in t
    assert "**All-reduce beside backward, and a mean.**" in t and "divides its gradients by 4" in t
    assert "In step 1, with one bucket, nothing overlapped." in t
    assert "**One broadcast at construction.**" in t
    forward = ddp_text("four_forward")
    assert "**All-reduce" not in forward and "**Gradient buckets" not in forward and "optimizer" not in forward
    assert "no all-reduce either" in ddp_text("four_forward")


def test_ddp_explanation_lists_the_no_sync_steps():
    t = ddp_text("two_accumulate")
    assert "**no_sync: 2 steps without all-reduce.** With accumulate 2, steps 1, 3 ran forward and backward" in t
    assert "no_sync" not in ddp_text("two_train")


def test_ddp_explanation_shows_a_files_parameter_names_and_errors_as_text():
    import dataclasses

    from ddp_traces import ddp_trace
    from dpviz.echo import code_span
    from dpviz.trace import Failure

    trace = ddp_trace("two_train")
    evil = "**x** [y](http://e.example) `z`"
    layouts = [{**lay, "buckets": [{**b, "params": [evil] + b["params"][1:]} for b in lay["buckets"]]}
               for lay in trace.facts["ddp"]["buckets"]]
    facts = {**trace.facts, "ddp": {**trace.facts["ddp"], "buckets": layouts}}
    failure = Failure(batch=len(trace.batches) - 1, type="RuntimeError", message=f"rank 1: {evil}", replica=1)
    t = "\n".join(explain(dataclasses.replace(trace, facts=facts, failure=failure)))
    from user_text_traces import outside_code

    assert code_span(evil, 40) in t and evil not in outside_code(t)  # only ever inside a code span
    assert f"on rank 1: {code_span('RuntimeError: rank 1: ' + evil, 300)}" in t


def _ddp_preset(name: str):
    """A DDP pitfall preset's run, recorded once; skipped where the presets do not exist yet."""
    from dpviz import presets

    if name not in getattr(presets, "DDP_PRESETS", {}):
        pytest.skip(f"no DDP preset {name}")
    from ddp_traces import record_config

    return record_config(presets.DDP_PRESETS[name].config)


def test_ddp_explanation_of_drop_last_names_the_rows_never_loaded():
    trace = _ddp_preset("ddp-drop-last")  # 10 rows, 3 ranks, drop_last: 3 each, one row never seen
    missing = sorted(set(range(trace.config.data_size)) - {i for b in trace.batches for i in b.sample_ids})
    t = "\n".join(explain(trace))
    assert missing and f"**Rows never loaded.** {len(missing)} dataset row ({missing[0]}) was never loaded" in t
    assert "**Rows loaded twice.**" not in t


def test_ddp_explanation_of_epochs_without_set_epoch_says_they_repeat():
    trace = _ddp_preset("ddp-no-set-epoch")
    per = len(trace.batches) // trace.config.epochs
    first = [i for b in trace.batches[:per] for i in b.sample_ids]
    second = [i for b in trace.batches[per:] for i in b.sample_ids]
    assert first == second  # what the paragraph claims, from the trace itself
    assert "Every epoch loaded the very same rows" in "\n".join(explain(trace))


def test_ddp_explanation_of_batch_size_per_process_multiplies_it():
    trace = _ddp_preset("ddp-batch-per-process")
    k, b = trace.config.gpus, trace.config.batch_size
    assert f"one step loads up to {k} × {b} = {k * b:,} rows" in "\n".join(explain(trace))
