"""Every pair of engines compared, from real runs at 4 devices (and 2 for a few pairs): the Compare figure's bars,
its title and the sentences under it hold each engine's bytes per step, held against what torch's own tensors say
those bytes are (the model's parameters and buffers, the activations at each stage's cut), by the ring algorithms
NCCL runs; and the command line's table and JSON say the same as the figure."""
from __future__ import annotations

import itertools
import json
from functools import cache

import pytest
import torch

from dpviz.analysis.compare import busiest, comparison, ratio_headline
from dpviz.analysis.memory_compare import memory_by_kind
from dpviz.analysis.traffic import sent_per_step, traffic
from dpviz.config import RunConfig
from dpviz.engines import ENGINES, engine
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.figures.compare import comparison_figure
from dpviz.figures.text_fit import unwrap
from dpviz.page.link import fit_pair
from dpviz.trace.legend import KINDS

# Settings every engine runs as they are: a model a pipeline can cut into 4 stages, training, full batches its 4
# microbatches divide, three steps.
SETTINGS = dict(model="mlp", train=True, batch_size=32, data_size=96)
# Tensor parallelism cuts no BatchNorm: its pairs run the transformer, which every engine runs (a pipeline in 4 stages).
CUT = "tp"
MODEL_OF = {CUT: "transformer"}
PAIRS = list(itertools.combinations(ENGINES, 2))
FEW = [("dp", "ddp"), ("zero1", "fsdp"), ("ddp", "pipeline")]


def model_of(first: str, second: str) -> str:
    return MODEL_OF.get(first) or MODEL_OF.get(second) or SETTINGS["model"]


@cache
def recorded(name: str, devices: int, model_name: str = SETTINGS["model"]):
    trace = engine(name).record(RunConfig(engine=name, gpus=devices, **{**SETTINGS, "model": model_name}))
    assert trace.failure is None, name
    return trace


def model(devices: int, model_name: str = SETTINGS["model"]) -> torch.nn.Module:
    return tutorial.build(RunConfig(engine="ddp", gpus=devices, **{**SETTINGS, "model": model_name}))[0]


def nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def expected_sent(name: str, devices: int, model_name: str = SETTINGS["model"]) -> list[float] | None:
    """Bytes each device sends per step by the textbook algorithms, from torch's own tensors (None: DataParallel,
    whose copies tests/test_compare.py holds against torch.chunk)."""
    module = model(devices, model_name)
    parameters, buffers = list(module.parameters()), [b for b in module.buffers() if b.is_floating_point()]
    share = (devices - 1) / devices
    grads = nbytes(parameters)
    if name in ("ddp", "zero1"):
        ring = 2 * share * grads + (share * grads if name == "zero1" else 0)
        # rank 0 broadcasts BatchNorm's running statistics before every forward (the counter is no float: DDP sends it too)
        buffers = nbytes(list(module.buffers()))
        return [ring + (buffers * (devices - 1) if rank == 0 else 0) for rank in range(devices)]
    if name == "fsdp":  # each parameter padded to a multiple of the ranks along dim 0, gathered twice, reduce-scattered
        padded = sum(-(-p.shape[0] // devices) * devices * p[0].numel() * p.element_size() for p in parameters)
        return [3 * share * padded] * devices
    if name == CUT:  # per block: an all-reduce of the activations in forward per row-wise Linear, in backward per
        # shared column-wise input (attention's, the MLP's); each rows x steps x width floats, 2(W-1)/W of it a ring
        blocks = module.blocks
        width = blocks[0].attention.wq.in_features
        activation = SETTINGS["batch_size"] * module.position.num_embeddings * width * 4
        return [2 * share * activation * 4 * len(blocks)] * devices
    if name == "pipeline" and model_name == SETTINGS["model"]:  # each stage sends its output forward and its input's gradient back, the whole batch a step
        layers = list(module.net.children())
        from dpviz.engines.pipeline.layers import split

        x = torch.zeros(SETTINGS["batch_size"], layers[0].in_features)
        cut_out, cut_in = [], []
        for stage in split(len(layers), devices):
            cut_in.append(x.numel() * x.element_size())
            for index in stage:
                x = layers[index].eval()(x)
            cut_out.append(x.numel() * x.element_size())
        return [(cut_out[s] if s < devices - 1 else 0) + (cut_in[s] if s > 0 else 0) for s in range(devices)]
    return None


@pytest.mark.parametrize("first, second", PAIRS + [pytest.param(*pair, id=f"{'-'.join(pair)}-2") for pair in FEW])
def test_every_pair_compares_each_engines_bytes_as_torch_counts_them(first, second, request):
    devices = 2 if request.node.callspec.id.endswith("-2") else 4
    chosen = model_of(first, second)
    a, b = recorded(first, devices, chosen), recorded(second, devices, chosen)
    (one, other), changed = fit_pair(b.config, (first, second))
    assert changed is None and one == a.config and other == b.config  # settings every engine runs as they are
    fig = comparison_figure(a, b)
    unit = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2}[fig.layout.yaxis.title.text.rsplit("(", 1)[1].rstrip(")")]
    for trace, axis in ((a, "x"), (b, "x2")):
        names = [trace.vocabulary.lane_name(lane.id) for lane in trace.lanes]
        bars = {name: 0.0 for name in names}
        for bar in fig.data:
            if bar.type == "bar" and bar.xaxis == axis:
                assert bar.marker.color == KINDS[bar.meta].color  # coloured by the kind that carries it, in every engine
                for device, y in zip(bar.x, bar.y):
                    bars[device] += y * unit
        sent = sent_per_step(trace)
        assert [bars[name] for name in names] == pytest.approx(sent, abs=unit * 0.01)
        expected = expected_sent(trace.engine, devices, chosen)
        if expected is not None:
            assert sent == pytest.approx(expected), trace.engine
        assert all(move.kind in KINDS for move in traffic(trace)), trace.engine
    # the title: the busier device's bytes over the other engine's busiest, as sent
    (_, most_a), (_, most_b) = busiest(a), busiest(b)
    title = unwrap(fig.layout.title.text)
    if "cannot show" not in title:
        top, low = max(most_a, most_b), min(most_a, most_b)
        assert title == ratio_headline(a, b) and (f"{top / low:.1f}×" in title or "about what" in title)
    text = " ".join(comparison(a, b))
    assert f"{a.spec.label}: " in text and f"{b.spec.label}: " in text and "(computed)" in text
    # memory, like with like: every device of both read at the end of a step
    for trace in (a, b):
        lanes = memory_by_kind(trace)
        assert len(lanes) == devices and all(lane.moment.startswith(f"the end of {trace.spec.unit} ") for lane in lanes)
        assert any(lane.kinds.get("parameters") for lane in lanes)  # a pipeline's stage of a ReLU alone holds none


def test_the_command_line_compares_any_two_as_the_figure_does(tmp_path, capsys):
    from dpviz.cli_compare import main

    out = tmp_path / "compare.json"
    assert main(["--engines", "zero1", "pipeline", "--gpus", "2", "--json", str(out)]) == 0
    printed = capsys.readouterr()
    assert "To run the same settings under ZeRO-1 and Pipeline" in printed.err  # fitted: the pipeline needs training
    found = json.loads(out.read_text())
    assert [e["engine"] for e in found["engines"]] == ["zero1", "pipeline"] and found["changed"]
    assert found["headline"] in printed.out and all(sentence in printed.out for sentence in found["sentences"])
    for entry in found["engines"]:
        sent = [device["sent per step"] for device in entry["devices"]]
        assert [sum(device["sent by what"].values()) for device in entry["devices"]] == pytest.approx(sent)
        assert all(device["memory"].get("parameters") for device in entry["devices"])
    assert found["settings"]["train"] is True and found["settings"]["model"] != "linear"


@pytest.mark.parametrize("argv, words", [
    (["--engines", "dp", "dp"], "names dp twice"),
    (["--engines", "dp", "tpu"], "invalid choice"),
    (["--engines", "dp", "ddp", "--microbatches", "4"], "is not an option of DataParallel or DistributedDataParallel"),
    (["--engines", "dp", "ddp", "--gpus", "99"], "gpus"),
])
def test_bad_options_are_one_line_and_exit_2(argv, words, capsys):
    from dpviz.cli_compare import main

    with pytest.raises(SystemExit) as stopped:
        main(argv)
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
