"""FSDP's Step through: one sharded module's phases, in the order the run recorded them, and what each rank holds.

The frames must follow the spans the run recorded for the module (rank 0's, by start), then the optimizer step;
at every frame each rank must be drawn holding the module whole (while gathered) or its shard, the shard's size
that of torch.chunk's dim-0 chunk of each parameter (as FSDP2 shards), read from the trace's facts.
"""
from __future__ import annotations

import functools
import json

import pytest
import torch

from dpviz.config import RunConfig
from dpviz.engines.ranks.launch import launch
from dpviz.engines.ddp.merge import to_trace
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.engines.fsdp.read.step import PARAMS_Y, largest_module, prepare_layer_steps, step_fsdp_figure
from dpviz.trace import json_io as trace_json
from dpviz.trace.values import TraceError

# The MLP at 64 features: Linear(64, 16), BatchNorm1d(16), Linear(16, 2). At 4 ranks the last weight's 2 rows
# give ranks 2 and 3 none of it (torch.chunk makes 2 chunks of 1 row): shards 1/W, and uneven.
SETTINGS = dict(model="mlp", input_size=64, optimizer="adam", batch_size=16, data_size=32, train=True)


@functools.cache
def run(ranks: int = 2, **changes):
    config = RunConfig(engine="fsdp", gpus=ranks, **{**SETTINGS, **changes})
    launched = launch(config)
    return config, to_trace(config, launched, backend="cpu", torch_version=torch.__version__, machine_gpus=0)


def chunk_elements(config: RunConfig, names: list[str], ranks: int) -> list[int]:
    """Per rank, the elements of these parameters in its torch.chunk of dim 0 (none when chunk makes fewer)."""
    params = dict(tutorial.build(config)[0].named_parameters())
    out = [0] * ranks
    for name in names:
        for rank, chunk in enumerate(torch.chunk(params[name].detach(), ranks, dim=0)):
            out[rank] += chunk.numel()
    return out


@pytest.mark.parametrize("ranks", [2, 4])
def test_the_frames_follow_the_spans_recorded_for_the_module_then_the_step(ranks):
    _, trace = run(ranks)
    assert trace.failure is None
    for module in [m["index"] for m in trace.facts["modules"][0]]:
        for step in range(len(trace.batches)):
            table = prepare_layer_steps(trace, step, module)
            spans = sorted((s for s in trace.spans_of(step) if s.group == module and s.lane == 0), key=lambda s: s.start)
            recorded = [s.phase for s in spans]
            assert recorded == ["gather", "compute", "reshard", "gather_backward", "reduce_scatter"]
            assert list(table["phase"]) == ["start", *recorded, "step"]
            starts = list(table["start_ms"][1:])
            assert starts == sorted(starts)  # the optimizer step began after the module's reduce-scatter


@pytest.mark.parametrize("ranks", [2, 4])
def test_each_frame_draws_each_rank_holding_its_torch_chunk_or_the_whole_module(ranks):
    config, trace = run(ranks)
    for module in trace.facts["modules"][0]:
        chunks = chunk_elements(config, module["params"], ranks)
        whole = sum(chunks)
        assert whole == sum(p.numel() for name, p in tutorial.build(config)[0].named_parameters()
                            if name in module["params"])
        figure = step_fsdp_figure(trace, 0, module["index"])
        table = prepare_layer_steps(trace, 0, module["index"])
        held_whole = {"gather", "compute", "gather_backward"}
        for row, frame in zip(table.itertuples(), figure.frames):
            assert row.held == ([whole] * ranks if row.phase in held_whole else chunks), (module["name"], row.phase)
            drawn = [0] * ranks  # the parameter bars' lengths in the frame, rank by rank
            for bar in frame.data[:2]:
                for x, y in zip(bar.x, bar.y):
                    drawn[round(y - PARAMS_Y)] += x or 0
            assert drawn == row.held
            gradient = sum(x or 0 for x in frame.data[2].x)
            assert gradient == {"start": 0, "gather": 0, "compute": 0, "reshard": 0, "gather_backward": ranks * whole,
                                "reduce_scatter": whole, "step": whole}[row.phase]
    if ranks == 4:  # Linear(16, 2) at 4 ranks: ranks 2 and 3 hold nothing of it, yet gather it whole
        last = trace.facts["modules"][0][-1]
        assert chunk_elements(config, last["params"], 4)[2:] == [0, 0]


def test_it_opens_on_the_largest_module_and_says_what_gloo_ran():
    config, trace = run(2)
    model = tutorial.build(config)[0]
    sizes = [sum(p.numel() for name, p in model.named_parameters() if name in m["params"])
             for m in trace.facts["modules"][0]]
    assert largest_module(trace) == sizes.index(max(sizes))
    figure = step_fsdp_figure(trace, 0)
    titles = [f.layout.title.text.replace("<br />", " ") for f in figure.frames]
    assert "net.0" in titles[0] and "phase 1 of 7: start of the step" in titles[0]
    assert "gloo has none: it ran as an all-reduce" in titles[5] and "reduce-scatter" in titles[5]
    assert [s.label for s in figure.layout.sliders[0].steps] == [f.name for f in figure.frames]


def test_the_title_and_the_slider_count_the_phases_alike_and_the_module_as_the_timeline_does():
    """The slider read "phase 1", the title "1 of 7" and the notes "sharded module 3 of 7": two counts, one unnamed.
    Now the slider and the title both read "phase k of n", from 1, and the module is counted as the timeline's hovers
    count it."""
    from dpviz.engines.ddp.read.timeline import prepare_timeline_ddp

    _, trace = run(2)
    figure = step_fsdp_figure(trace, 0)
    slider, frames = figure.layout.sliders[0], len(figure.frames)
    assert [int(step.label) for step in slider.steps] == list(range(1, frames + 1))
    for step, frame in zip(slider.steps, figure.frames):
        reads = f"{slider.currentvalue.prefix}{step.label}{slider.currentvalue.suffix}"  # what the slider shows
        assert reads == f"phase {step.label} of {frames}" and f" · {reads}: " in frame.layout.title.text
    module, modules = largest_module(trace), len(trace.facts["modules"][0])
    notes = figure.layout.title.subtitle.text.replace("<br />", " ").replace("<br>", " ")
    assert f"sharded module {module + 1} of {modules} (" in notes
    table = prepare_timeline_ddp(trace, 0, 0)
    hovers = table.loc[table["group"] == module, "detail"]
    assert len(hovers) and all(f"sharded module {module + 1} of {modules}" in hover for hover in hovers)


def test_a_trace_whose_ranks_name_different_modules_is_refused():
    _, trace = run(2)
    document = json.loads(trace_json.dumps(trace))
    document["facts"]["modules"][1][0]["params"].pop()
    with pytest.raises(TraceError, match="the ranks name different sharded modules"):
        trace_json.loads(json.dumps(document))
    document = json.loads(trace_json.dumps(trace))
    document["facts"]["modules"][0][0]["held"] = "many"
    with pytest.raises(TraceError, match="held elements"):
        trace_json.loads(json.dumps(document))


def test_the_fsdp_page_draws_its_step_through():
    from test_app import page, show_tab

    app = page(engine="fsdp", gpus="2", train="true", optimizer="adam", model="mlp", input_size="64")
    assert not app.exception
    show_tab(app, "Step through")
    assert not app.exception and not app.error
    specs = [json.loads(chart.proto.spec) for chart in app.get("plotly_chart")]
    stepped = [spec for spec in specs if spec.get("frames")]
    assert stepped, "no chart with frames on the Step through tab"
    titles = [frame["layout"]["title"]["text"] for frame in stepped[0]["frames"]]
    assert "start of the step" in titles[0] and any("reduce-scatter" in t for t in titles)


def test_a_trace_without_the_modules_draws_a_figure_that_says_so():
    _, trace = run(2)
    document = json.loads(trace_json.dumps(trace))
    del document["facts"]["modules"]
    figure = step_fsdp_figure(trace_json.loads(json.dumps(document)), 0)
    assert not figure.frames and "no sharded module to step through" in figure.layout.title.text
    assert "does not say what each rank held" in figure.layout.annotations[0].text


def test_forward_only_the_module_is_gathered_run_and_resharded():
    _, trace = run(2, train=False)
    table = prepare_layer_steps(trace, 0, 0)
    assert list(table["phase"]) == ["start", "gather", "compute", "reshard"]
    assert not any(sum(g) for g in table["gradient"])


def test_the_timeline_opens_on_the_last_steps_work_and_says_what_gloo_ran():
    from dpviz.engines.ddp.read.timeline import prepare_timeline_ddp, timeline_ddp_figure

    _, trace = run(2)
    last = len(trace.batches) - 1
    figure = timeline_ddp_figure(trace, 0, last)
    notes = figure.layout.title.subtitle.text.replace("<br />", " ").replace("<br>", " ")
    assert "on gloo (this CPU run) each reduce-scatter runs as an all-reduce" in notes
    assert f"opened on step {last + 1}" in notes
    low, high = figure.layout.xaxis.range
    table = prepare_timeline_ddp(trace, 0, last)
    modules = table[(table["batch"] == last) & (table["group"] >= 0)]
    assert low <= modules["start_ms"].min() and modules["end_ms"].max() <= high  # every module's spans in view
    earlier = table[table["batch"] < last]
    assert earlier["end_ms"].max() < high and (earlier["start_ms"] < low).any()  # the earlier steps are off it


def test_the_share_said_is_rank_0s_real_part_and_the_ranks_that_hold_padding_only_are_named():
    """The title said "about 1/4" of every module at 4 ranks, whatever each rank held: Linear(16, 2)'s 2 rows give
    rank 0 half of it and ranks 2 and 3 none (only FSDP2's padding). The share and the padding-only ranks are now
    torch.chunk's, as FSDP2 cuts dim 0."""
    from fractions import Fraction

    config, trace = run(4)
    for module in trace.facts["modules"][0]:
        chunks = chunk_elements(config, module["params"], 4)
        share = Fraction(chunks[0], sum(chunks))
        titles = [f.layout.title.text.replace("<br>", " ").replace("<br />", " ") for f in
                  step_fsdp_figure(trace, 0, module["index"]).frames]
        assert "about 1/4" not in " ".join(titles)
        if share.numerator == 1:
            assert f"on rank 0 ({share.numerator}/{share.denominator}" in titles[0], titles[0]
        empty = [rank for rank, chunk in enumerate(chunks) if chunk == 0]
        said = "padding only" in titles[0]
        assert said == bool(empty), (module["name"], titles[0])
        if empty == [2, 3]:
            assert "ranks 2 and 3 hold padding only" in titles[0]
    last = trace.facts["modules"][0][-1]  # Linear(16, 2): the case the review found
    assert chunk_elements(config, last["params"], 4)[2:] == [0, 0]
