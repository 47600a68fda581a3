"""What happened: the key figures, a line per finding with the explanations on request, and the files to download."""
from __future__ import annotations

import re

import streamlit as st

from dpviz.analysis.failure_words import failure_parts
from dpviz.echo import code_span
from dpviz.exports import chrome_trace
from dpviz.trace import json_io as trace_json
from dpviz.analysis.explain import explain
from dpviz.analysis.summary import key_figures
from dpviz.trace import Trace
from dpviz.page.link import COMPARE
from dpviz.page.state import ENGINE, side_key, views


UNIT = re.compile(r"(\d) (?=(?:[KMGT]i)?B\b|ms\b|s\b|×)")


def keep_units(text: str) -> str:
    """A number and its unit held together ("96 B", "1.27 KiB", "3.1 ms"): a non-breaking space between
    them, so a narrow box never wraps a figure as "96 / B"."""
    return UNIT.sub("\\1\u00a0", text)


def key_metrics(trace: Trace) -> None:
    """The key figures as metrics in a row that wraps: each as wide as its words, so none is cut off on a
    narrow window or a projector's 1024 pixels."""
    with st.container(horizontal=True, gap="medium"):
        for label, value in views().get(trace, key_figures).items():
            st.metric(label, keep_units(value), width="content", border=True)


def headline(paragraph: str, limit: int = 220) -> str:
    """A paragraph's bold opening ("**Why GPU 0 carries more.**") and its first sentence, whole or not at all:
    a line that says what was found, not only what it is about."""
    if not (paragraph.startswith("**") and "**" in paragraph[2:]):
        return paragraph.split(". ")[0][:limit]
    end = paragraph.index("**", 2) + 2
    bold, rest = paragraph[:end], paragraph[end:]
    stop = rest.find(". ")
    sentence = rest[: stop + 1] if stop >= 0 else rest
    if len(sentence) > limit:  # its first clause, the rest in the details
        cut = max(sentence.rfind(mark, 0, limit) for mark in (", ", "; ", ": "))
        sentence = sentence[:cut] + " …" if cut > 0 else ""
    return bold + ("" if sentence.count("`") % 2 else sentence)  # never a code span cut in two


def what_happened(trace: Trace, columns: int = 2, heading: bool = True) -> None:
    """The key figures and one line per finding first; the explanations themselves on request."""
    if heading:
        st.subheader("What happened")
    key_metrics(trace)
    paragraphs = views().get(trace, explain)
    paragraphs = [keep_units(p) for p in paragraphs]
    st.markdown("\n".join(f"- {headline(p)}" for p in paragraphs))
    with st.expander("Why, finding by finding"):
        if columns == 1:  # beside the other engine: already in a column of its own
            for paragraph in paragraphs:
                st.markdown(paragraph)
            return
        size = (len(paragraphs) + columns - 1) // columns
        for column, start in zip(st.columns(columns, gap="large"), range(0, len(paragraphs), size or 1)):
            for paragraph in paragraphs[start:start + size]:
                column.markdown(paragraph)


def downloads(trace: Trace) -> None:
    name = f"dpviz-{trace.engine}-{trace.backend}-{trace.config.gpus}{trace.spec.lane_files}"
    what = trace.spec.runs if st.session_state.get(ENGINE) == COMPARE else ""
    key = side_key(trace, "download")
    st.sidebar.download_button(f"Trace (JSON) {what}".strip(), lambda: trace_json.dumps(trace), f"{name}.json",
                               "application/json", on_click="ignore", key=f"{key}_json")
    st.sidebar.download_button(f"Chrome trace (Perfetto) {what}".strip(), lambda: chrome_trace.dumps(trace),
                               f"{name}.perfetto.json", "application/json", on_click="ignore", key=f"{key}_chrome")
    st.sidebar.download_button(f"HTML report {what}".strip(), lambda: report(trace), f"{name}.html", "text/html",
                               on_click="ignore", key=f"{key}_html")


def report(trace: Trace) -> str:
    """The HTML report, built when the button is pressed (it draws every view)."""
    from dpviz.figures.report import html_report

    return html_report(trace)


def failure_markdown(trace: Trace) -> str:
    """The failure's one line (dpviz.analysis.failure_words) as markdown: what dpviz saw and torch's cause as code."""
    lead, joint, cause = failure_parts(trace)
    return f"{code_span(lead)}{joint}{code_span(cause)}" if lead else code_span(cause)  # the joint: the engine's words
