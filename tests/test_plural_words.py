"""Counts said in words: '2 epochs', '1 microbatch', never '2 epoches' or '4 stages, 1 microbatches'.

plural() gave every word ending in "ch" an "es", so "epoch" read "epoches"; the pipeline's schedule panels and its
Memory title wrote their counts by hand ("1 microbatches", "1 microbatch' activations"). The plurals below are
English's own, for every word the package hands plural(), and a new word must join them; the pipeline's counts are
its settings' (one microbatch: a stage can keep no more than the one).
"""
from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from dpviz.analysis.wording import plural
from dpviz.config import RunConfig
from dpviz.engines import engine
from dpviz.engines.pipeline.read.compare import schedules_figure
from dpviz.engines.pipeline.read.memory import memory_pipeline_figure
from dpviz.figures.text_fit import unwrap

ENGLISH = {  # singular: plural, as a dictionary gives them
    "CPU thread": "CPU threads", "CUDA device": "CUDA devices", "GPU": "GPUs", "Python process": "Python processes",
    "activation": "activations", "all-gather": "all-gathers", "all-reduce": "all-reduces", "bar": "bars",
    "batch": "batches", "broadcast": "broadcasts", "bucket": "buckets", "chunk": "chunks", "core": "cores",
    "cut Linear": "cut Linears", "dataset row": "dataset rows", "device": "devices", "element": "elements",
    "epoch": "epochs", "full batch": "full batches", "gradient": "gradients", "layer": "layers", "line": "lines",
    "loss": "losses", "microbatch": "microbatches", "module": "modules", "more cut": "more cuts",
    "more rank": "more ranks", "more stage": "more stages", "other batch": "other batches",
    "parameter tensor": "parameter tensors", "parameter": "parameters", "piece": "pieces", "process": "processes",
    "quiet stretch": "quiet stretches", "rank": "ranks", "real GPU": "real GPUs", "replica": "replicas", "row": "rows",
    "run": "runs", "scalar": "scalars", "sharded module": "sharded modules", "span": "spans", "stage": "stages",
    "step": "steps", "tensor": "tensors", "thread": "threads", "time": "times", "box": "boxes", "stomach": "stomachs",
}
PACKAGE = Path(__file__).resolve().parent.parent / "dpviz"


def test_plural_gives_englishs_plural_of_every_word_it_is_handed():
    for word, many in ENGLISH.items():
        assert plural(1, word) == f"1 {word}"
        assert plural(2, word) == f"2 {many}", word
        assert plural(0, word) == f"0 {many}", word
    assert plural(1_234, "epoch") == "1,234 epochs"


def test_every_word_the_package_hands_plural_is_checked_above():
    handed = set()
    for path in PACKAGE.rglob("*.py"):
        handed |= set(re.findall(r"""plural\([^'"\n]*?,\s*['"]([^'"]+)['"]\)""", path.read_text()))
    assert "epoch" in handed and "microbatch" in handed  # the scan finds the words the review read
    assert handed <= set(ENGLISH), sorted(handed - set(ENGLISH))


@cache
def one_microbatch_through_four_stages():
    config = RunConfig(engine="pipeline", train=True, inputs="tensor", model="mlp", gpus=4, schedule="gpipe",
                       batch_size=32, data_size=64, microbatches=1)
    trace = engine("pipeline").record(config)
    assert trace.failure is None
    return trace


def _text(fig) -> str:
    parts = [fig.layout.title.text or "", fig.layout.title.subtitle.text or ""]
    parts += [a.text or "" for a in fig.layout.annotations]  # the panels' titles
    return unwrap(" ".join(parts)).replace("<br>", " ")


def test_the_schedules_count_one_microbatch_in_the_singular():
    trace = one_microbatch_through_four_stages()
    stages, micro = trace.config.gpus, trace.config.microbatches
    words = _text(schedules_figure(trace))
    assert f"{stages} stages, {micro} microbatch" in words and "1 microbatches" not in words, words
    # With one microbatch in the step a stage keeps its activations, and no more: "stage 1 keeps 1 microbatch".
    assert "stage 1 keeps 1 microbatch" in words and "keeps 1 microbatches" not in words, words


def test_the_memory_title_says_whose_activations_without_a_plural_possessive_on_one():
    trace = one_microbatch_through_four_stages()
    words = _text(memory_pipeline_figure(trace, 0))
    assert "1 microbatch'" not in words.replace("1 microbatch's", "") and "1 microbatches" not in words, words
    assert f"up to {trace.config.microbatches} microbatch's activations at once" in words, words
    hovers = " ".join(t.hovertemplate for t in memory_pipeline_figure(trace, 0).data if t.hovertemplate)
    counts = [row[2] for t in memory_pipeline_figure(trace, 0).data if t.customdata is not None for row in t.customdata]
    assert "microbatches in flight" not in hovers and counts
    assert all(c in ("0 microbatches", "1 microbatch") for c in counts), counts  # one microbatch: none, or it
