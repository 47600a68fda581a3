"""A model that raises, under every engine: the trace keeps the real error, on the step it happened, and the spans
of the steps before it; and every line that tells of the failure names the engine that ran, and no other.

100 rows in batches of 30 leave a last step of 4 rows, one per rank of 4; the MLP's BatchNorm1d refuses a batch of
one row in training ("Expected more than 1 value per channel when training"). Under FSDP that error stops a forward
with modules gathered whole, which once swapped the error for a KeyError and lost every span.
"""
from __future__ import annotations

import functools
import re
import threading

import pytest

from dpviz.analysis.explain import explain
from dpviz.analysis.summary import key_figures
from dpviz.config import RunConfig
from dpviz.engines import ENGINES
from dpviz.presets import PRESETS
from dpviz.engines.run import record
from dpviz.trace import json_io as trace_json

from budget import limit

GPUS = 4
FAILING_STEP = 3  # rows 90..99: one row per rank
MESSAGE = "Expected more than 1 value per channel when training"


@functools.cache
def failing_run(engine: str):
    """The trace of one run whose last step raises on every rank (one recording per engine)."""
    config = RunConfig(engine=engine, gpus=GPUS, train=True, model="mlp", optimizer="adam")
    assert (config.data_size, config.batch_size) == (100, 30)
    got: list = []
    thread = threading.Thread(target=lambda: got.append(record(config)), daemon=True)
    thread.start()
    thread.join(timeout=limit(starts=1 + GPUS, then_s=config.timeout_s))  # the forkserver and the ranks start
    assert got, f"the {engine} run did not end"
    return got[0]


@pytest.mark.parametrize("engine", ["ddp", "zero1", "fsdp"])
def test_the_real_error_is_reported_on_its_step_and_the_earlier_steps_keep_their_spans(engine):
    trace = failing_run(engine)
    assert trace.failure is not None
    assert (trace.failure.batch, trace.failure.type) == (FAILING_STEP, "ValueError"), trace.failure
    assert MESSAGE in trace.failure.message
    for step in range(FAILING_STEP):
        ranks = sorted(span.lane for span in trace.spans_of(step, "forward"))
        assert ranks == list(range(GPUS)), f"step {step}: forward spans on ranks {ranks}"
    assert trace.spans_of(FAILING_STEP, "forward"), "the failing step's forward ran, and took its time"


@pytest.mark.parametrize("engine", ["ddp", "zero1", "fsdp"])
def test_the_failed_run_passes_its_engines_check_when_saved_and_loaded(engine):
    trace = failing_run(engine)
    text = trace_json.dumps(trace)
    loaded = trace_json.loads(text)  # TraceError unless it passes the generic rules and its engine's check
    loaded.spec.part("check")(loaded)
    assert loaded.engine == engine and loaded.failure == trace.failure
    assert trace_json.dumps(loaded) == text


def _names_of_others(engine: str) -> re.Pattern:
    """Any other engine's name, label or short name, as a word of its own ("DataParallel" is not found inside
    "DistributedDataParallel"); what runs under a process engine's own name aside (ZeRO-1 runs over DDP)."""
    own = {ENGINES[engine].label, ENGINES[engine].short}
    others = {word for name, spec in ENGINES.items() if name != engine
              for word in (spec.label, spec.short) if word not in own}
    return re.compile(r"(?<![\w-])(" + "|".join(re.escape(w) for w in sorted(others, key=len, reverse=True)) + r")(?![\w-])")


def failing(engine: str):
    """A run whose model raises: on the ranks of a process engine, in a replica under DataParallel (the
    batchnorm-one-row preset: 95 rows on 4 devices leave a last chunk of one row)."""
    if engine == "dp":
        return record(RunConfig(**{**PRESETS["batchnorm-one-row"].config.to_dict(), "backend": "simulated"}))
    if engine == "pipeline":  # one layer a stage, microbatches of one row: the BatchNorm's stage refuses the first
        return record(RunConfig(engine=engine, gpus=GPUS, train=True, model="mlp", optimizer="adam", batch_size=4,
                                data_size=8, microbatches=4))
    if engine == "tp":  # no BatchNorm under tensor parallelism: a rank told to raise in its second step
        return told_to_fail(engine)
    return failing_run(engine)


def told_to_fail(engine: str):
    """The trace of a run on the ffn whose rank 1 raises in step 2, the others then failing in its collectives."""
    import torch

    from dpviz.engines.ranks.launch import launch

    config = RunConfig(engine=engine, gpus=GPUS, train=True, model="ffn")
    launched = launch(config, fault=(1, 1, "raise"))
    merge = ENGINES[engine].part("rank_program").merge
    assert all(code is not None for code in launched["exit_codes"])  # every rank's process ended with the run
    return merge(config, launched, backend="cpu", torch_version=torch.__version__, machine_gpus=0)


TOLD = "rank 1 was told to fail in step 1"  # the launcher's fault, in place of BatchNorm's words


@pytest.mark.parametrize("engine", list(ENGINES))
def test_every_failure_line_names_the_engine_that_ran_and_no_other(engine, capsys):
    trace = failing(engine)
    message = TOLD if engine == "tp" else MESSAGE
    assert trace.failure is not None and message in trace.failure.message
    spec, others = ENGINES[engine], _names_of_others(engine)
    code = spec.part("outcome")(trace, trace.config, False)  # the command line's last line
    line = capsys.readouterr().err.strip()
    assert code == 1 and line.startswith(f"dpviz: {spec.label} failed in {spec.unit} {trace.failure.batch + 1} of "), line
    assert not others.search(line), line
    # The report's heading, the key figures and every sentence of What happened that tells of the failure.
    failure_words = [paragraph for paragraph in explain(trace) if "failed" in paragraph or message in paragraph]
    assert failure_words, explain(trace)
    for text in (spec.part("report_heading")(trace), *failure_words, *key_figures(trace)):
        assert not others.search(text), f"{engine}: {text[:300]}"
    assert spec.label in spec.part("report_heading")(trace) or spec.short in spec.part("report_heading")(trace)
    if spec.processes:  # What happened opens on who ran the ranks: this engine, not the DDP it may run over
        opening = explain(trace)[0]
        lanes = f"{GPUS} {trace.vocabulary.lane_noun}s"  # ranks, or a pipeline's stages
        assert opening.startswith("**Processes") and re.search(
            rf"\*\* {re.escape(spec.label)}( \([^)]*\))? ran {lanes}", opening), opening


def test_the_words_check_sees_another_engines_name():
    assert _names_of_others("fsdp").search("dpviz: DistributedDataParallel failed in step 4")
    assert _names_of_others("ddp").search("under DataParallel, GPU 0") and not _names_of_others("dp").search(
        "under DataParallel, GPU 0")
    assert _names_of_others("dp").search("ZeRO-1 shards the optimizer")
