"""HTML report: one offline page with every view, the key figures, the explanation and the tutorial log."""
import dataclasses
import html
import re

from plotly.offline import get_plotlyjs

from dpviz.analysis.explain import explain
from dpviz.figures import html_report
from dpviz.figures.report import MAX_LOG_LINES, bounded_log, markdown_to_html
from dpviz.exports.tutorial_log import tutorial_log
from figure_traces import LARGEST, LARGEST_TRAINING, recorded, synthetic

VIEWS = ["fig-flow-batch-0", "fig-flow-batch-3", "fig-split", "fig-timeline", "fig-sample-map", "fig-step",
         "fig-memory-batch-0", "fig-memory-batch-3"]


def test_report_holds_every_view_once():
    page = html_report(recorded(gpus=8))
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    for div in VIEWS:
        assert page.count(f'<div id="{div}"') == 1
        assert f'document.getElementById("{div}")' in page
    for section in ["summary", "explanation", "flow", "split", "timeline", "memory", "sample-map", "step", "log"]:
        assert page.count(f'<section id="{section}">') == 1
    assert '"frames"' in page or "Plotly.addFrames" in page  # the step-through animation


def test_plotly_embedded_once_and_nothing_fetched():
    page = html_report(recorded(gpus=3))
    js = get_plotlyjs()
    assert page.count(js) == 1
    rest = page.replace(js, "")  # plotly.js names its CDN inside; the page around it must fetch nothing
    assert not re.search(r"<script[^>]+src=", rest) and not re.search(r"https?://", rest)


def test_report_holds_the_log_the_figures_and_the_explanation():
    trace = recorded(gpus=3)
    page = html_report(trace)
    for line in tutorial_log(trace).splitlines():
        assert html.escape(line) in page
    for paragraph in explain(trace):
        assert markdown_to_html(paragraph) in page
    assert "<td>GPU turns left idle</td>" in page and "splits 4, 4, 2" in page


def test_single_flow_when_every_batch_splits_alike():
    page = html_report(recorded(gpus=2, data_size=90))
    assert 'id="fig-flow-batch-0"' in page and 'id="fig-flow-batch-2"' not in page
    assert 'id="fig-memory-batch-0"' in page and 'id="fig-memory-batch-2"' not in page


def test_training_report_shows_the_way_back_and_memory():
    page = html_report(recorded(gpus=3, train=True))
    assert "gradients summed on GPU 0" in page and "The way back" in page
    assert page.count('<section id="memory">') == 1 and "computed from tensor sizes (simulated devices)" in page
    assert "<td>peak memory</td>" in page


def test_no_memory_section_without_samples():
    page = html_report(dataclasses.replace(recorded(gpus=3), memory=[]))
    assert '<section id="memory">' not in page and 'id="fig-split"' in page


def test_markdown_is_escaped_then_formatted():
    assert markdown_to_html("**Why** `torch.chunk` <b>") == "<strong>Why</strong> <code>torch.chunk</code> &lt;b&gt;"


def test_largest_run_report_stays_openable():
    trace = synthetic(LARGEST)
    log = bounded_log(trace)
    assert len(log.splitlines()) == MAX_LOG_LINES + 1 and "lines left out of this report" in log
    page = html_report(trace)
    assert len(page) < len(get_plotlyjs()) + 3 * 1024 * 1024
    assert all(f'<div id="{div}"' in page for div in VIEWS[:1] + VIEWS[2:6])  # synthetic: no memory samples


def test_largest_training_run_report_stays_openable():
    page = html_report(synthetic(LARGEST_TRAINING))
    assert len(page) < len(get_plotlyjs()) + 3 * 1024 * 1024
    assert "The way back" in page and 'id="fig-timeline"' in page


def test_report_figures_are_drawn_light_whatever_the_page_theme():
    """The views leave ink and background to the page's theme; a report has none, so it draws them light."""
    page = html_report(recorded(gpus=2))
    figures = page.count("Plotly.newPlot(")
    assert figures >= 4
    assert page.count('"paper_bgcolor":"#FFFFFF"') == page.count('"plot_bgcolor":"#FFFFFF"') == figures
    assert page.count('"font":{"color":"#000000","family":"Inter') == figures  # the layout's ink, dark on white
    assert "#000037" not in page  # the page theme's ink, which only Streamlit replaces
