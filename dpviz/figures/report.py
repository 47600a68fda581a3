"""A self-contained HTML report of a run: every view, the key figures, the explanation and the tutorial log.

The memory view appears when the trace has memory samples (every recorded trace does).

    from dpviz.figures import html_report
    open("report.html", "w").write(html_report(trace))

One string; plotly.js is embedded once, so the file opens offline. Its figures are drawn light (white,
dark ink: layout.light), whatever the page's theme. The tutorial log is cut to
MAX_LOG_LINES (its first and last lines) so a 10,000-batch run still gives a file a browser opens.
"""
from __future__ import annotations

import html
import re

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from dpviz.echo import plotly_text
from dpviz.analysis.explain import explain
from dpviz.analysis.summary import summary_table
from dpviz.trace import Trace
from dpviz.figures.log import MAX_LOG_LINES, bounded_log  # noqa: F401  the log's bound, named here too
from dpviz.figures.layout import light
from dpviz.figures.sizes import FONT_FAMILY
from dpviz.figures.trace_words import backend_note
from dpviz.figures.views import TEXT, views_of
PLOT_CONFIG = {"displaylogo": False}
CSS = f"""
body {{ font-family: {FONT_FAMILY}; font-size: 17px; color: #222; max-width: 1400px; margin: 2em auto; padding: 0 1em; }}
h1 {{ font-size: 1.7em; }} h2 {{ margin-top: 2em; border-bottom: 1px solid #ddd; }}
table {{ border-collapse: collapse; }} td, th {{ padding: 4px 12px; border-bottom: 1px solid #eee; text-align: left; }}
pre {{ background: #f6f6f6; padding: 1em; overflow-x: auto; font-size: 14px; max-height: 40em; }}
code {{ background: #f0f0f0; padding: 0 3px; }}
"""


# What explain() writes: a code span's opening backticks, a backslash escape, or a bold marker.
_MARKDOWN = re.compile(r"(`+)|\\([!-/:-@\[-`{-~])|(\*\*)")


def markdown_to_html(text: str) -> str:
    """The markdown explain() writes (**bold**, code spans, backslash escapes), escaped and turned into HTML."""
    parts: list[str | None] = []  # HTML, with None where a bold marker goes
    i = 0
    for match in _MARKDOWN.finditer(text):
        if match.start() < i:  # inside a code span already taken
            continue
        parts.append(html.escape(text[i:match.start()]))
        fence, escaped, _ = match.groups()
        i = match.end()
        if escaped is not None:
            parts.append(html.escape(escaped))
        elif fence is None:
            parts.append(None)
        else:  # a code span ends at the next run of exactly as many backticks; its text is taken as it is
            close = re.compile(rf"(?<!`){fence}(?!`)").search(text, i)
            if close is None:
                parts.append(html.escape(fence))
                continue
            code = text[i:close.start()]
            if code.strip() and code[0] == code[-1] == " ":  # the padding around a text that starts or ends with `
                code = code[1:-1]
            parts.append(f"<code>{html.escape(code)}</code>")
            i = close.end()
    parts.append(html.escape(text[i:]))
    return _bold(parts)


def _bold(parts: list[str | None]) -> str:
    """Join `parts`, bold markers (None) paired into <strong> elements; an unpaired last one stays '**'."""
    markers = [k for k, part in enumerate(parts) if part is None]
    unpaired = markers[-1] if len(markers) % 2 else None
    tags = iter(["<strong>", "</strong>"] * len(markers))
    return "".join("**" if k == unpaired else next(tags) if part is None else part for k, part in enumerate(parts))


def _figure_html(fig: go.Figure, div_id: str) -> str:
    # A copy in the light look: the views leave ink and background to the page's theme, and a report
    # has none (the figure itself may be the page's, cached).
    fig = light(go.Figure(fig))
    # "fig-" keeps plot ids apart from section ids: plotly draws into the first element with its id.
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"fig-{div_id}", config=PLOT_CONFIG,
                       auto_play=False)


def _section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{anchor}">\n<h2>{html.escape(title)}</h2>\n{body}\n</section>'


def html_report(trace: Trace) -> str:
    """Every view of `trace`, its key figures, explanation and tutorial log, as one offline HTML page."""
    config = trace.config
    heading = trace.spec.part("report_heading")(trace)
    table = summary_table(trace).to_html(index=False, border=0, escape=True)
    paragraphs = "\n".join(f"<p>{markdown_to_html(p)}</p>" for p in explain(trace))
    sections = [
        _section("summary", "Key figures", table),
        _section("explanation", "What happened and why", paragraphs),
    ]
    for view in views_of(trace):  # every view that draws this trace's engine, its own too, in the page's order
        if not view.shows(trace):  # drawn for this engine, and with something for this run
            continue
        shown = view.figures_for_report(trace)
        if view.control == TEXT:
            sections += [_section(view.anchor, view.heading_for(trace), "\n".join(f"<pre>{html.escape(text)}</pre>" for _, text in shown))]
        elif shown:
            sections += [_section(view.anchor, view.heading_for(trace), "\n".join(_figure_html(fig, key) for key, fig in shown))]
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(heading)}</title>",
        f"<style>{CSS}</style>",
        f'<script type="text/javascript">{get_plotlyjs()}</script>',
        "</head><body>",
        f"<h1>{html.escape(heading)}</h1>",
        # backend_note is HTML already (plotly's labels are HTML); the torch version is the trace file's text.
        f"<p>{backend_note(trace)}; torch {plotly_text(trace.torch_version, 40)}; "
        f"seed {config.seed}; shuffle={config.shuffle}. Made by dpviz.</p>",
        *sections,
        "</body></html>",
    ])
