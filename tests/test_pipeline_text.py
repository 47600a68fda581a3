"""What a pipeline run's key figures, table, explanation, log, device sentence and traffic say, with the trace as the
oracle: every number read back from its spans and facts, counted from 1, a trace file's names shown as text.

Three small real runs, recorded once (one gloo process per stage): the MLP as 2 stages under GPipe, the
transformer as 4 stages under 1F1B with a short last batch left out, and an MLP whose one-row microbatches fail
in BatchNorm1d.
"""
from __future__ import annotations

import dataclasses
import re
from functools import cache

import pytest

from dpviz.analysis.wording import human_bytes
from dpviz.config import RunConfig
from dpviz.engines import engine
from dpviz.engines.pipeline.read import bubble
from dpviz.engines.pipeline.read.text import (describe_stages, explain_pipeline, key_figures_pipeline,
                                              summary_rows_pipeline, tutorial_log_pipeline)
from dpviz.engines.pipeline.read.traffic import pipeline_model_bytes, pipeline_traffic
from dpviz.exports.tutorial_log import size_text
from dpviz.trace import Lane
from user_text_traces import outside_code

RUNS = {
    "gpipe": dict(model="mlp", gpus=2, data_size=64, batch_size=16, microbatches=4, schedule="gpipe"),
    # 100 rows in batches of 32: three steps, the last 4 rows of the epoch left out.
    "1f1b": dict(model="transformer", gpus=4, data_size=100, batch_size=32, microbatches=8, schedule="1f1b"),
    # Four microbatches of one row: BatchNorm1d cannot train on one row, and step 1 fails on stage 1.
    "failing": dict(model="mlp", gpus=2, data_size=16, batch_size=4, microbatches=4, schedule="gpipe"),
}
ZERO_BASED = re.compile(r"\b(?:[Ss]teps?|[Ss]tages?|[Mm]icrobatch(?:es)?) 0\b|\b[FB]0\b")


@cache
def run(name: str):
    return engine("pipeline").record(RunConfig(engine="pipeline", train=True, inputs="tensor", **RUNS[name]))


def texts(trace) -> list[str]:
    figures = key_figures_pipeline(trace)
    return [*figures, *figures.values(), *(cell for row in summary_rows_pipeline(trace) for cell in row),
            *explain_pipeline(trace), tutorial_log_pipeline(trace),
            describe_stages(trace, "this machine has 0 CUDA GPUs")]


def held_sum(trace, kind: str) -> int:
    return sum(stage[kind]["bytes"] for stage in trace.facts["held"])


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
def test_the_key_figures_name_the_stages_microbatches_schedule_and_the_bubble(name):
    trace = run(name)
    config, stages = trace.config, len(trace.lanes)
    figures = key_figures_pipeline(trace)
    assert figures["stages (processes)"] == str(config.gpus) == str(stages)
    assert figures["schedule"] == {"gpipe": "GPipe", "1f1b": "1F1B"}[config.schedule]
    rows = {s.rows for s in trace.spans if s.phase == "forward"}
    assert rows == {config.batch_size // config.microbatches}
    assert figures["microbatches per step"] == f"{config.microbatches} × {rows.pop()} rows"
    assert figures["steps"] == str(len(trace.batches))
    from dpviz.analysis.opening_step import opening_step

    step = bubble.opening_step(trace)
    assert step == opening_step(trace) >= 1  # the step every engine's views open on, past the shapes' first step
    replayed = bubble.percent(bubble.replay(trace, step).share)
    measured = bubble.percent(bubble.idle_share(trace, step))
    textbook = bubble.percent(bubble.textbook_share(stages, config.microbatches))
    assert figures[f"idle in step {step + 1}, replayed (textbook)"] == f"{replayed} ({textbook})"
    assert figures["idle on this host's wall clock"] == measured
    assert figures["microbatches held at most, per stage"] == ", ".join(map(str, bubble.held_most(trace, step)))
    sent = sum(row[3] for rows in trace.facts["sent"] for row in rows if row[0] == step)
    assert sent > 0 and figures["sent between stages per step"] == human_bytes(sent)


def test_1f1b_holds_fewer_microbatches_the_later_the_stage_and_the_explanation_says_how_many():
    trace = run("1f1b")
    held = bubble.held_most(trace, 1)
    assert held == [4, 3, 2, 1]  # stage s (from 1) holds S - s + 1; GPipe would hold all 8
    words = " ".join(explain_pipeline(trace))
    assert "held at most 4, 3, 2, 1 microbatches" in words and "GPipe keeps all 8" in words
    order = " ".join(f"{kind}{micro + 1}" for kind, micro in bubble.order(trace, 1, 0))
    assert f"stage 1 ran {order}" in words and order.startswith("F1 F2 F3 F4 B1 F5")


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
def test_the_traffic_is_what_each_stage_sent_and_its_neighbour_received(name):
    trace = run(name)
    stages, steps = len(trace.lanes), len(trace.batches)
    moves = pipeline_traffic(trace)
    by = {(m.step, m.lane, m.what): m for m in moves}
    assert len(by) == len(moves) == steps * stages * 2  # every stage both sends and receives, of both kinds
    kinds = {"send_activations": ("activations", 1), "send_gradients": ("gradients", -1)}
    recorded = 0
    for stage, rows in enumerate(trace.facts["sent"]):
        for step, phase, sends, size in rows:
            what, toward = kinds[phase]
            assert sends == trace.config.microbatches and size > 0
            assert by[(step, stage, what)].sent == size
            assert by[(step, stage + toward, what)].received == size  # the neighbour got what was sent
            recorded += 1
    assert recorded == steps * (stages - 1) * 2
    assert sum(m.sent for m in moves) == sum(m.received for m in moves) == sum(
        row[3] for rows in trace.facts["sent"] for row in rows)
    for step in range(steps):  # nothing comes from before the first stage or after the last
        assert by[(step, 0, "activations")].received == 0 and by[(step, 0, "gradients")].sent == 0
        assert by[(step, stages - 1, "activations")].sent == 0 and by[(step, stages - 1, "gradients")].received == 0


@pytest.mark.parametrize("name", ["gpipe", "1f1b", "failing"])
def test_the_model_bytes_are_every_stages_own_summed(name):
    trace = run(name)
    params, grads = pipeline_model_bytes(trace)
    assert params == held_sum(trace, "parameters") > max(s["parameters"]["bytes"] for s in trace.facts["held"])
    assert grads == held_sum(trace, "gradients")


def test_the_explanation_leads_with_the_replayed_bubble_and_the_textbooks_then_this_hosts_clock_and_why():
    trace = run("gpipe")
    step = bubble.opening_step(trace)
    replayed, measured = bubble.replay(trace, step), bubble.idle_share(trace, step)
    textbook = bubble.textbook_share(2, 4)
    assert replayed.clock == bubble.CPU  # a run on the CPU keeps every pass's CPU time
    assert measured - replayed.share > 0.15  # two processes on a shared CPU, a tiny MLP: waiting, not computing
    paragraph = next(p for p in explain_pipeline(trace) if p.startswith("**The bubble.**"))
    first = paragraph.split(". ")[0]  # the page's one line per finding: both figures in it
    assert f"idle {bubble.percent(replayed.share)}" in first and "Replayed" in first
    assert "(S − 1) / (M + S − 1) = 1 / 5" in paragraph and f"is {bubble.percent(textbook)}" in paragraph
    cores = bubble.host_cores(trace)
    assert cores is not None and cores >= 1
    assert f"On this host's wall clock (2 processes on {cores:,} core{'s' if cores > 1 else ''}) the stages sat idle " \
           f"{bubble.percent(measured)}" in paragraph
    assert "passing it costs more than computing it" in paragraph
    start, end = bubble.window(trace, step)
    assert f"2 × {(end - start) * 1e3:,.2f} ms" in paragraph


def test_every_paragraph_opens_with_a_bold_lead_and_the_cpu_is_never_called_a_gpu():
    trace = run("gpipe")
    paragraphs = explain_pipeline(trace)
    assert all(re.match(r"\*\*[^*]+\*\* ", p) for p in paragraphs)
    assert paragraphs[0].startswith("**Processes, not GPUs.**")
    said = describe_stages(trace, "this machine has 0 CUDA GPUs")
    assert said.startswith("Real processes, no GPU:") and "ran 2 stages" in said and "gloo" in said
    assert "GPUs" not in said.replace("0 CUDA GPUs", "") and "NCCL" not in said


@pytest.mark.parametrize("name", ["gpipe", "1f1b", "failing"])
def test_every_number_a_reader_sees_counts_from_one(name):
    for text in texts(run(name)):
        assert not ZERO_BASED.search(text), text


def test_the_layers_and_what_each_stage_held_come_from_the_facts():
    trace = run("gpipe")
    layers, held = trace.facts["layers"], trace.facts["held"]
    assert layers == [["net.0", "net.1"], ["net.2", "net.3"]]
    paragraph = next(p for p in explain_pipeline(trace) if p.startswith("**Each stage holds"))
    for stage, (names, mine) in enumerate(zip(layers, held)):
        p = mine["parameters"]
        assert (f"stage {stage + 1} holds {', '.join(f'`{n}`' for n in names)} ({p['elements']:,} parameters, "
                f"{human_bytes(p['bytes'])})").lower() in paragraph.lower()
    rows = dict(summary_rows_pipeline(trace))
    assert rows["layers per stage"] == "stage 1: net.0, net.1; stage 2: net.2, net.3"
    total = sum(h["parameters"]["elements"] for h in held)
    assert f"{total:,} in all ({human_bytes(held_sum(trace, 'parameters'))})" in rows["parameters per stage"]


def test_the_log_has_a_header_and_a_line_per_stage_per_step_from_the_spans():
    trace = run("1f1b")
    lines = tutorial_log_pipeline(trace).splitlines()
    assert lines[0].startswith("Let's use 4 stages! (4 processes on the CPU, gloo; 1F1B")
    assert lines[1:5] == [f"stage {s + 1} holds {', '.join(names)}" for s, names in enumerate(trace.facts["layers"])]
    steps = [line for line in lines if line.startswith("Step ")]
    assert [line.split(":")[0] for line in steps] == [f"Step {b + 1} of 3" for b in range(3)]
    for batch in trace.batches:
        at = lines.index(steps[batch.index])
        share = bubble.percent(bubble.replay(trace, batch.index).share)
        wall = bubble.percent(bubble.idle_share(trace, batch.index))
        assert f"idle {share} of the step replayed" in lines[at] and f"{wall} on this host's wall clock" in lines[at]
        for stage in range(4):
            line = lines[at + 1 + stage]
            first = next(s for s in bubble.computes(trace, batch.index, stage) if s.phase == "forward")
            order = " ".join(f"{kind}{micro + 1}" for kind, micro in bubble.order(trace, batch.index, stage))
            assert line.startswith(f"stage {stage + 1}: input size {size_text(first.input_shape)} output size "
                                   f"{size_text(first.output_shape)};")
            assert f"; {order}" in line
            assert ("8 losses" in line) == (stage == 3)


def test_a_short_last_batch_is_said_to_be_left_out():
    trace = run("1f1b")
    assert len(trace.batches) == 3 and trace.config.data_size % trace.config.batch_size == 4
    paragraph = next(p for p in explain_pipeline(trace) if p.startswith("**A batch cut into microbatches.**"))
    assert "the last 4 rows of each epoch were left out" in paragraph
    assert "the last 4 rows of each epoch left out" in dict(summary_rows_pipeline(trace))["steps"]


def test_a_failed_step_is_told_on_its_stage_and_nothing_is_read_from_it():
    trace = run("failing")
    failure = trace.failure
    assert failure is not None and failure.batch == 0 and failure.replica == 0
    paragraphs = explain_pipeline(trace)
    failed = next(p for p in paragraphs if p.startswith("**Step 1 failed** on stage 1: `"))
    assert failure.headline[:60] in failed and "single row" in failed
    assert not any(p.startswith(("**The bubble.**", "**GPipe")) for p in paragraphs)
    figures = key_figures_pipeline(trace)
    assert not any("idle" in label for label in figures)
    log = tutorial_log_pipeline(trace).splitlines()
    assert log[-1] == f"{failure.type}: {failure.message}" and "and it failed:" in log[-4]


def test_a_layer_name_with_markdown_shows_as_text():
    trace = run("gpipe")
    evil = ["[link](http://evil.example)", "**bold**\nnext <b>x</b>", "`tick` ``two``"]
    edited = dataclasses.replace(trace, facts={**trace.facts, "layers": [evil, ["net.2", "net.3"]]})
    for paragraph in explain_pipeline(edited):
        prose = outside_code(paragraph)
        assert "[link](" not in prose and "**bold**" not in prose and "<b>" not in prose and "tick" not in prose
    paragraph = next(p for p in explain_pipeline(edited) if p.startswith("**Each stage holds"))
    assert "``` `tick` ``two`` ```" in paragraph  # a fence the name cannot close, padded
    log = tutorial_log_pipeline(edited).splitlines()
    assert "stage 1 holds [link](http://evil.example), **bold** next <b>x</b>, `tick` ``two``" in log
    assert all("\n" not in cell for row in summary_rows_pipeline(edited) for cell in row)


def test_on_gpus_the_lanes_are_named_from_one_and_their_names_escaped():
    trace = run("gpipe")
    lanes = [Lane(0, "stage 0 (process on cuda:0)"), Lane(1, "[link](http://evil.example)")]
    on_gpus = dataclasses.replace(trace, backend="cuda", lanes=lanes)
    said = describe_stages(on_gpus, "this machine has 2 CUDA GPUs")
    assert said.startswith("Real processes on real GPUs:") and "NCCL" in said
    assert "stage 1 (process on cuda\\:\u2060" in said and "stage 0" not in said
    assert "stage 2 (\\[link\\]\\(http\\:" in said and "[link](" not in said
    assert explain_pipeline(on_gpus)[0].startswith("**Processes, one per stage and GPU.**")


def test_a_trace_without_the_pipelines_facts_still_reads_from_its_spans():
    trace = run("gpipe")
    bare = dataclasses.replace(trace, facts={"ddp": trace.facts["ddp"]})
    assert pipeline_traffic(bare) == [] and pipeline_model_bytes(bare) == (None, None)
    paragraphs = explain_pipeline(bare)
    assert not any(p.startswith("**Each stage holds") for p in paragraphs)
    held = next(p for p in paragraphs if p.startswith("**GPipe"))
    assert "every stage held the activations of 4 microbatches at once" in held  # counted from the order run
    assert any(p.startswith("**The bubble.**") for p in paragraphs)
    figures = key_figures_pipeline(bare)
    assert figures["microbatches held at most, per stage"] == "4, 4" and "sent between stages per step" not in figures
    assert len([line for line in tutorial_log_pipeline(bare).splitlines() if line.startswith("stage ")]) == 2 * 4
    assert summary_rows_pipeline(bare)


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
def test_one_steps_boxes_give_what_each_stage_sent_the_first_no_gradients_the_last_no_activations(name):
    from dpviz.engines.pipeline.read.one_step import one_step_pipeline

    trace = run(name)
    stages = len(trace.lanes)
    picture = one_step_pipeline(trace, 1)
    sent = {(stage, phase): size for stage, rows in enumerate(trace.facts["sent"]) for step, phase, _, size in rows
            if step == 1}
    # the forward's sends and the backward's, by their column: both are the legend's send/receive
    arrows = {"send_activations" if a.column == "forward" else "send_gradients": a for a in picture.arrows}
    assert {a.kind for a in picture.arrows} == {"send/receive"}
    assert arrows["send_activations"].sent == {s: sent[s, "send_activations"] for s in range(stages - 1)}
    assert arrows["send_gradients"].sent == {s: sent[s, "send_gradients"] for s in range(1, stages)}
    for arrow in arrows.values():  # a box shows only what its stage sent: nothing it only received
        assert arrow.received == {} and arrow.lanes == sorted(arrow.sent)
