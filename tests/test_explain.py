"""The explanation is derived from the trace: other settings, other numbers and other words."""
from dpviz import RunConfig, record
from dpviz.explain import explain
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
    assert "batches 0-2 (30 rows each) split 10, 10, 10" in t
    assert "batch 3 (10 rows) splits 4, 4, 2" in t
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
    assert "10, 10, 10 rows in batches 0-2; 4, 4, 2 rows in batch 3" in t
    assert "**sums** the 3 replicas' gradients onto GPU 0" in t and "not an average" in t
    assert "SGD step then runs on GPU 0" in t and "one after another on the CPU autograd thread" in t
    eight = text(gpus=8, train=True)
    assert "2, 2, 2, 2, 2 rows in batch 3" in eight and "(8 in batches 0-2, 5 in batch 3)" in eight
    assert "way back" not in text(gpus=3)  # forward only
    assert "nothing is split and nothing is summed" in text(gpus=1, train=True)
    real = "\n".join(explain(as_cuda(recorded(gpus=3, train=True))))
    assert "**The way back.**" in real and "autograd thread" not in real


def test_memory_paragraph_uses_the_samples():
    t = text(gpus=3, train=True)
    assert "GPU 0 peaks at 1.23 KiB after the backward of batch 0" in t
    assert "no other GPU holds more than 456 B (GPU 1, after backward), so GPU 0 needs 2.8× as much" in t
    assert "the whole batch (600 B, where the others hold at most 200 B)" in t
    assert "the summed gradients (48 B) and the optimizer state (48 B), which no other GPU ever holds" in t
    eight = text(gpus=8, train=True)
    assert "no other GPU holds more than 240 B" in eight and "5.0× as much" in eight
    forward = text(gpus=2)
    assert "peaks at 1,008 B after the gather of batch 0" in forward and "the gathered output (240 B)" in forward
    assert "loss" not in forward.split("How much more")[1].split("**")[1]
    assert "How much more" not in text(gpus=1)


def test_pitfall_explanations_hold_for_the_edge_cases():
    from dpviz.presets import PRESETS

    first = " ".join(explain(record(RunConfig(inputs="kwargs", gpus=16))))  # 30 rows make 15 chunks: batch 0 fails
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
    assert "rows in batch 3" not in failed_training  # the way back leaves out the batch that never got to its loss
