"""Compare's headline ratio compares like with like: each engine's bytes in one whole step, by one rule. It averaged
each run's bytes over its own steps: a pipeline (which drops the short last batch) ran 3 steps where tensor
parallelism ran 4, one of them 10 rows of 30, so `engines=pipeline,tp` said 9.6× where a whole step of each says
8.0×. Torch is the oracle: the bytes of the tensors the ranks handed their collectives and sends in that step, and
the model's own output on a whole batch's rows."""
from __future__ import annotations

import re
from functools import cache

import pytest

from dpviz.analysis.compare import HEADLINE_STEP, busiest, ratio_headline
from dpviz.analysis.opening_step import whole_steps
from dpviz.analysis.traffic import counted_step, sent_per_step, which_steps
from dpviz.config import RunConfig
from dpviz.engines.run import record
from dpviz.engines.workload.models import build_model, random_rows
from dpviz.figures.compare import comparison_figure
from dpviz.figures.text_fit import unwrap
from dpviz.page.link import fit_pair


@cache
def pair(first: str, second: str):
    (a, b), _ = fit_pair(RunConfig(), (first, second))
    traces = record(a), record(b)
    assert all(trace.failure is None for trace in traces)
    return traces


def ring_all_reduce(ranks: int, size: int) -> float:
    return 2 * (ranks - 1) / ranks * size


def said_ratio(headline: str) -> float:
    return float(re.search(r"sends ([\d.]+)× what", headline)[1])


def test_a_tensor_parallel_rank_and_a_pipeline_stage_are_each_read_in_one_whole_step():
    pipeline, tp = pair("pipeline", "tp")
    assert len(pipeline.batches) != len(tp.batches)  # the pipeline drops the short last batch: the runs' steps differ
    ranks = len(tp.lanes)
    for trace in (pipeline, tp):
        step = counted_step(trace)
        assert step in whole_steps(trace) and trace.batches[step].rows == trace.config.batch_size
    # Tensor parallelism's forward all-reduce sums the row-wise Linear's partial outputs: the model's output on a whole
    # batch's rows, a ring's share of it sent; what the ranks handed CommDebugMode's all-reduce in that step says so.
    model, _ = build_model(tp.config.model, tp.config.input_size, tp.config.output_size)
    output = model(random_rows(tp.config.model, tp.config.input_size, tp.config.batch_size))
    step = counted_step(tp)
    handed = [sum(size for at, collective, _, size in rows if at == step and collective.startswith("all-reduce"))
              for rows in tp.facts["moved"]]
    assert handed == [output.nbytes] * ranks
    assert sent_per_step(tp) == pytest.approx([ring_all_reduce(ranks, output.nbytes)] * ranks)
    # A stage sends what it handed torch's send ops in that step: activations on, or gradients back.
    step = counted_step(pipeline)
    sent = [sum(size for at, _, _, size in rows if at == step) for rows in pipeline.facts["sent"]]
    assert sent_per_step(pipeline) == pytest.approx(sent)
    headline = ratio_headline(pipeline, tp)
    assert headline.startswith(HEADLINE_STEP)
    assert said_ratio(headline) == round(max(sent) / ring_all_reduce(ranks, output.nbytes), 1)
    figure = comparison_figure(pipeline, tp)
    assert unwrap(figure.layout.title.text) == headline  # the chart's title is the same ratio
    notes = unwrap(figure.layout.title.subtitle.text)
    assert which_steps([pipeline, tp]) in notes and "averaged" not in notes  # which step each engine's bytes are of


def test_tensor_parallel_against_fsdp_compares_one_whole_step_of_each():
    tp, fsdp = pair("tp", "fsdp")
    assert tp.batches[-1].rows < tp.config.batch_size  # a short last step, whose all-reduce is a third of the others'
    step = counted_step(tp)
    per_step = {}
    for trace in (tp, fsdp):
        counted = counted_step(trace)
        assert counted in whole_steps(trace)
        per_step[trace.engine] = max(sent_per_step(trace))
        assert busiest(trace)[1] == per_step[trace.engine]
    ranks = len(tp.lanes)
    handed = sum(size for at, _, _, size in tp.facts["moved"][0] if at == step)
    assert per_step["tp"] == pytest.approx(ring_all_reduce(ranks, handed))
    high, low = max(per_step.values()), min(per_step.values())
    if counted_step(tp) == counted_step(fsdp):  # the same step of each, said once
        assert which_steps([tp, fsdp]) == f"in one whole step, step {step + 1} of each"
    else:
        assert which_steps([tp, fsdp]) == (f"in one whole step each (TP's step {step + 1}, "
                                           f"FSDP's step {counted_step(fsdp) + 1})")
    headline = ratio_headline(tp, fsdp)
    if round(high / low, 1) == 1.0:
        assert "about what" in headline
    else:
        assert said_ratio(headline) == round(high / low, 1)


def test_a_run_that_accumulates_gradients_is_read_in_a_step_that_all_reduces():
    """With gradients accumulated over 2 steps, a whole step that only accumulates sends nothing: the step read is
    the last whole one that stepped the optimizer, and its all-reduce is there."""
    config = RunConfig(engine="ddp", gpus=2, train=True, batch_size=8, data_size=28, accumulate=2)
    trace = record(config)
    assert trace.failure is None
    step = counted_step(trace)
    assert step in whole_steps(trace) and trace.spans_of(step, "step")
    assert max(whole_steps(trace)) != step  # the last whole step only accumulated
    params = sum(p.nbytes for p in build_model(config.model, config.input_size, config.output_size)[0].parameters())
    assert sent_per_step(trace) == pytest.approx([ring_all_reduce(2, params)] * 2)
