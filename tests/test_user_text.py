"""A trace file's own text (device, thread and argument names, torch version, failure, warning) shows as
text in every figure, the explanation, the device sentence and the HTML report: never as a link or an image."""
import json

import pytest

from dpviz.analysis.explain import explain
from dpviz.figures import (
    argument_batches, flow_figure, html_report, inputs_figure, memory_figure, sample_map_figure, split_figure,
    step_figure, timeline_figure,
)
from dpviz.analysis.wording import describe_devices
from dpviz.analysis.batch_facts import memory_batches
from user_text_traces import ANCHOR, MARKUP, outside_code, payload_trace


@pytest.fixture(scope="module")
def trace():
    return payload_trace()


def figures(trace):
    last = len(trace.batches) - 1
    yield from (flow_figure(trace, b) for b in range(last + 1))
    yield from (split_figure(trace), timeline_figure(trace), sample_map_figure(trace), step_figure(trace))
    yield from (inputs_figure(trace, b) for b in argument_batches(trace))
    yield from (memory_figure(trace, b) for b in memory_batches(trace))


def strings(value):
    """Every string in a figure's JSON, decoded: what plotly.js gets to render."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def test_every_figure_shows_the_files_text_as_text(trace):
    shown = []
    for fig in figures(trace):
        for text in strings(json.loads(fig.to_json())):
            assert "<a" not in text and "<img" not in text and "<b>bold-evil" not in text, text[:300]
            shown.append(text)
    everything = "\n".join(shown)
    assert "&lt;a href=\"http://evil.example/x\"&gt;" in everything  # the device name, as text
    assert "&lt;b&gt;bold-evil" in everything  # an argument's name, as text
    assert all(len(text) < 2_000 for text in shown if "evil" in text)  # cut, not 20,000 characters


def test_the_explanation_and_the_device_sentence_show_the_files_text_as_text(trace):
    paragraphs = explain(trace) + [describe_devices(trace, machine_gpus=0)]
    for paragraph in paragraphs:
        prose = outside_code(paragraph)
        assert not any(markup in prose for markup in MARKUP), prose
        assert "<" not in prose.replace("\\<", ""), prose
        assert len(paragraph) < 3_000
    assert "evil" in describe_devices(trace, machine_gpus=0)


def test_the_html_report_escapes_the_files_text(trace):
    page = html_report(trace)
    for markup in ('<a href="http://evil.example', "<img src=http://evil.example", "<b>bold-evil"):
        assert markup not in page
    assert "&lt;a href=&quot;http://evil.example/x&quot;&gt;" in page or "&lt;a href=\"http://evil.example/x\"&gt;" in page
    assert ANCHOR not in page


def test_the_report_turns_escapes_and_code_spans_of_any_fence_into_html():
    from dpviz.echo import code_span, markdown_text
    from dpviz.figures.report import markdown_to_html

    text = f"**Bold** {markdown_text('[x](http://e.example) <b>')} and {code_span('a ``b`` `c')} **open"
    assert markdown_to_html(text) == ("<strong>Bold</strong> [x](http:\u2060//e.example) &lt;b&gt; and "
                                      "<code>a ``b`` `c</code> **open")


def test_long_argument_names_cut_to_the_same_start_keep_a_row_each():
    from dpviz.engines.dp.read.inputs import _labels

    labels = _labels(["<" + "a" * 60, "<" + "a" * 61, "<" + "a" * 62, "x"])
    assert len(set(labels)) == 4 and all("<" not in label and len(label) < 60 for label in labels)
