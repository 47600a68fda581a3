"""Every batch and step number a reader sees counts from 1, in every preset of every engine.

Traces count batches and steps from 0 (trace.batches[i].index, span.batch, trace.failure.batch); whatever a
visitor reads counts them from 1 (GPUs and ranks keep torch's own numbers, from 0). Each preset of
dpviz.presets.LINK_PRESETS is recorded once (a comparison's two runs, one per engine), and everything read of it
is gathered as text: the preset's own words, the banner's failed batch, What happened, the key figures and
their table, the log, the command line's last line, the HTML report's words, and every string of every figure
the page draws for it (each batch of a view drawn per batch, each window of the Timeline, the report's
figures): titles, notes, axis titles and ticks, legends, hovers with their placeholders filled from the
figure's own data. The trace is the oracle: no batch or step reads 0, every one named is one of the run's
(1..len(trace.batches)), a failed one is the one trace.failure names, and a batch said to hold R rows holds R.
"""
from __future__ import annotations

import contextlib
import html
import io
import re
from functools import cache
from typing import Any, Iterator

import numpy as np
import pytest

from dpviz.analysis.explain import explain
from dpviz.analysis.summary import key_figures
from dpviz.analysis.wording import plural
from dpviz.engines import engine
from dpviz.exports.tutorial_log import tutorial_log
from dpviz.figures.report import html_report
from dpviz.figures.views import BATCH, SAMPLED, WINDOW, views_of
from dpviz.page.running import same_settings
from dpviz.page.tabs import failed_unit
from dpviz.presets import COMPARE_PRESETS, LINK_PRESETS
from dpviz.trace import Trace
from ddp_traces import record_config
from figure_traces import recorded

NUMBER = r"\d{1,3}(?:,\d{3})*(?!\d|[.,]\d)"  # '4', '2,000'; not the '0' of '0.24' nor the '3' of '30'
NUMBERS = rf"{NUMBER}(?:\s*[-–]\s*{NUMBER}|,\s*{NUMBER}|,?\s+and\s+{NUMBER})*"  # '1-3', '1, 2 and 4'
NOUN = r"(batch|step|microbatch)(?:es|s)?"
# 'batch 4', 'batches 1-3', 'steps 1 and 4'; not a shape ('input batch 30 × 5')
SAID = re.compile(rf"\b{NOUN}\s+({NUMBERS})(?!\s*[×x]\s*\d)", re.I)
FAILED = re.compile(rf"\b{NOUN}\s+({NUMBER})\s+(?:failed|did not end)|\b(?:failed|stopped)\s+(?:in|at)\s+{NOUN}\s+({NUMBER})"
                    rf"|\b(?:waited|stopped answering)\b[^.]*?\b(?:in|of)\s+(step)\s+({NUMBER})", re.I)
ROWS = re.compile(rf"\b{NOUN}\s+({NUMBER})(?:\s+of\s+{NUMBER})?(?:\s+\(|:\s+|\s+has\s+(?:only\s+)?)({NUMBER})\s+rows?\b", re.I)
# A placeholder a hover fills with a batch's or step's number: 'batch %{customdata[6]:,}', 'step %{y}'.
PLACEHOLDER = re.compile(rf"\b{NOUN}\s+%\{{(x|y|z|text|customdata)(?:\[(\d+)\])?[^}}]*\}}", re.I)
HIDDEN = {"meta", "uid", "legendgroup"}  # a figure's keys no one reads; a shape's or annotation's name neither


def _numbers(text: str) -> list[int]:
    return [int(n.replace(",", "")) for n in re.findall(r"\d{1,3}(?:,\d{3})*", text)]


# ---- the runs

@cache
def _run(config) -> Trace:
    if config.engine == "ddp":
        return record_config(config)  # shared with the other tests' DDP presets
    if config.engine == "dp":  # simulated devices: this machine has no GPUs for them (tests/test_readers.py's)
        return recorded(**{**config.to_dict(), "backend": "simulated"})
    return engine(config.engine).record(config)


def runs(name: str) -> list[Trace]:
    """The preset's run, or a comparison's two (DataParallel's and the other engine's)."""
    config = LINK_PRESETS[name].config
    if name in COMPARE_PRESETS:
        return [_run(same_settings(config, "dp")), _run(config)]
    return [_run(config)]


# ---- what a reader reads of a run

def _visible(value: Any, path: tuple[str, ...] = ()) -> Iterator[str]:
    """Every string of a figure's JSON but the keys no one sees."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            hidden = key == "name" and any(p in ("shapes", "annotations", "images") for p in path)
            if key not in HIDDEN and not hidden:
                yield from _visible(item, (*path, key))
    elif isinstance(value, np.ndarray):
        yield from _visible(value.tolist(), path)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _visible(item, path)


def _filled(fig) -> Iterator[str]:
    """'batch 4' for each value a hover's placeholder after 'batch' or 'step' shows, read from the figure's data."""
    for data in [*fig.data, *(d for frame in fig.frames or () for d in frame.data)]:
        for key in ("hovertemplate", "texttemplate"):
            templates = getattr(data, key, None)
            for template in [templates] if isinstance(templates, str) else templates or ():
                for match in PLACEHOLDER.finditer(template or ""):
                    noun, field, column = match.groups()
                    values = getattr(data, field, None)
                    if values is None:
                        continue
                    values = np.array([list(v) if isinstance(v, (list, tuple)) else v for v in values], dtype=object)
                    if column is not None:
                        values = values[:, int(column)]
                    for value in {v for v in values.ravel().tolist() if v is not None}:
                        shown = f"{int(value):,}" if isinstance(value, (int, float)) and float(value).is_integer() else value
                        yield f"{noun} {shown}"


def figure_texts(fig) -> list[str]:
    if fig is None:
        return []
    if isinstance(fig, str):
        return [fig]
    return [*_visible(fig.to_plotly_json()), *_filled(fig)]


def drawn(trace: Trace) -> Iterator[tuple[str, Any]]:
    """Every figure the page offers for the trace, as its controls reach them, and the report's."""
    total = len(trace.batches)
    for view in views_of(trace):
        if not view.shows(trace):
            continue
        if view.control == BATCH:
            figures = [(b, view.build(trace, b)) for b in range(total)]
        elif view.control == SAMPLED:
            figures = [(b, view.build(trace, b)) for b in view.sampled(trace)]
        elif view.control == WINDOW:
            window = view.window(trace)
            figures = [(first, view.build(trace, first)) for first in range(0, total, window)]
            detail = view.detail_for(trace)
            if detail is not None and total > view.detail_window:
                figures += [(first, detail(trace, first)) for first in range(0, total, view.detail_window)]
        else:
            figures = [(None, view.build(trace))]
        figures += view.figures_for_report(trace)
        for at, fig in figures:
            yield f"{view.key} ({at})", fig


def _report_words(trace: Trace) -> list[str]:
    """The HTML report's own words: its figures' scripts (read above) left out."""
    page = re.sub(r"<script\b.*?</script>", " ", html_report(trace), flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page)).splitlines()


def _outcome(trace: Trace) -> str:
    """What the command line prints last."""
    said = io.StringIO()
    with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
        trace.spec.part("outcome")(trace, trace.config, False)
    return said.getvalue()


def texts(name: str, trace: Trace) -> Iterator[tuple[str, str]]:
    """(where, text) for everything a reader reads of the run."""
    preset = LINK_PRESETS[name]
    yield "preset", f"{preset.title}. {preset.look_for}"
    if trace.failure is not None:
        yield "banner", f"{failed_unit(trace)} failed"
        yield "failure", trace.failure.headline
    for paragraph in explain(trace):
        yield "what happened", paragraph
    for label, value in key_figures(trace).items():
        yield "key figures", f"{label}: {value}"
    for row in trace.spec.part("summary_rows")(trace):
        yield "key figures table", " | ".join(map(str, row))
    yield "log", tutorial_log(trace)
    yield "command line", _outcome(trace)
    for line in _report_words(trace):
        yield "report", line
    for where, fig in drawn(trace):
        for text in figure_texts(fig):
            yield where, text


def compared_texts(dp: Trace, other: Trace) -> Iterator[tuple[str, str]]:
    """The comparison page's own sentences and figure."""
    from dpviz.analysis.compare import comparison
    from dpviz.figures.compare import comparison_figure, growth_figure

    for sentence in comparison(dp, other):
        yield "compare", sentence
    for text in figure_texts(comparison_figure(dp, other)):
        yield "compare figure", text
    growth = growth_figure(dp, other)
    for text in figure_texts(growth) if growth is not None else []:
        yield "growth figure", text


# ---- the oracle

def problems(trace: Trace, said: list[tuple[str, str]]) -> list[str]:
    """Each batch or step the texts name that is not one of the run's, counted from 1."""
    total, unit, failure = len(trace.batches), trace.spec.unit, trace.failure
    out = []
    for where, text in said:
        for match in SAID.finditer(text):
            numbers = _numbers(match.group(2))
            ours = match.group(1).lower() == unit  # DataParallel's Step through counts its frames as steps
            if 0 in numbers or (ours and not all(1 <= n <= total for n in numbers)):
                out.append(f"{where}: {match.group(0)!r}, in a run of {plural(total, unit)}: {text[:300]!r}")
        if failure is not None:
            for match in FAILED.finditer(text):
                noun, number = next((n, v) for n, v in zip(match.groups()[::2], match.groups()[1::2]) if v)
                if noun.lower() == unit and _numbers(number) != [failure.batch + 1]:
                    out.append(f"{where}: {match.group(0)!r}, but {unit} {failure.batch + 1} failed, in {text[:300]!r}")
        for match in ROWS.finditer(text):
            noun, number, rows = match.groups()
            index = _numbers(number)[0] - 1
            if noun.lower() != unit or not 0 <= index < total or (failure is not None and failure.batch == index):
                continue  # out of range: said above; a failed batch may stop before its rows are read
            if _numbers(rows)[0] != trace.batches[index].rows:
                out.append(f"{where}: {match.group(0)!r}, but {unit} {index + 1} holds {trace.batches[index].rows} rows")
    return sorted(set(out))


@pytest.mark.parametrize("name", list(LINK_PRESETS))
def test_every_batch_and_step_a_reader_sees_counts_from_one(name):
    traces = runs(name)
    found = []
    for trace in traces:
        said = list(texts(name, trace))
        assert len(said) > 20 and any(SAID.search(text) for _, text in said), name  # the texts were read
        found += problems(trace, said)
    if len(traces) == 2:
        found += problems(traces[1], list(compared_texts(*traces)))
    assert not found, "\n".join(found[:40])


def test_the_oracle_sees_a_number_counted_from_zero():
    """What the test looks for, on a run it knows: batch 4 of 4 failed, and the first holds 30 rows."""
    trace = runs("batchnorm-one-row")[0]
    assert trace.failure.batch == 3 and len(trace.batches) == 4 and trace.batches[0].rows == 30
    assert problems(trace, [("t", "Batch 4 failed; batch 1 (30 rows); batches 1-3 and 4")]) == []
    for wrong in ("in batch 0: rows", "batches 0-2 (30 rows each)", "batch 3 failed", "stopped at batch 3",
                  "batches 1 and 5", "Batch 2: 29 rows", "Batch 0</b>"):
        assert problems(trace, [("t", wrong)]), wrong
    for right in ("input batch 30 × 5", "a loss of 0.2401 in batch 4, 0.3694", "step 5 of 8: loss"):
        assert problems(trace, [("t", right)]) == [], right


def test_a_hovers_placeholder_is_read_with_its_data():
    import plotly.graph_objects as go

    fig = go.Figure(go.Bar(x=[1, 2], y=[3, 4], customdata=[[0, "a"], [1, "b"]],
                           hovertemplate="batch %{customdata[0]:,}<br>%{customdata[1]}<extra></extra>"))
    assert sorted(_filled(fig)) == ["batch 0", "batch 1"]
