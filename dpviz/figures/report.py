"""A self-contained HTML report of a run: every view, the key figures, the explanation and the tutorial log.

The memory view appears when the trace has memory samples (every recorded trace does).

    from dpviz.figures import html_report
    open("report.html", "w").write(html_report(trace))

One string; plotly.js is embedded once, so the file opens offline. The tutorial log is cut to
MAX_LOG_LINES (its first and last lines) so a 10,000-batch run still gives a file a browser opens.
"""
from __future__ import annotations

import html
import re

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from ..catalogue import INPUT_SPECS, MODEL_SPECS
from ..echo import plotly_text
from ..explain import explain
from ..summary import chunks_per_batch, memory_batches, summary_table
from ..trace import Trace
from ..tutorial_log import tutorial_log
from .flow import flow_figure
from .inputs import argument_batches, inputs_figure
from .memory import memory_figure
from .sample_map import sample_map_figure
from .split import split_figure
from .step import step_figure
from .style import FONT_FAMILY, backend_note, plural
from .timeline import timeline_figure

MAX_LOG_LINES = 2_000
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


def bounded_log(trace: Trace, max_lines: int = MAX_LOG_LINES) -> str:
    """The tutorial log, or its first and last lines with a note of how many were left out."""
    lines = tutorial_log(trace).splitlines()
    if len(lines) <= max_lines:
        return "\n".join(lines)
    head, tail = lines[: max_lines // 2], lines[-(max_lines // 2) :]
    skipped = len(lines) - len(head) - len(tail)
    return "\n".join(head + [f"… {plural(skipped, 'line')} left out of this report …"] + tail)


def _figure_html(fig: go.Figure, div_id: str) -> str:
    # "fig-" keeps plot ids apart from section ids: plotly draws into the first element with its id.
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"fig-{div_id}", config=PLOT_CONFIG,
                       auto_play=False)


def _section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{anchor}">\n<h2>{html.escape(title)}</h2>\n{body}\n</section>'


def html_report(trace: Trace) -> str:
    """Every view of `trace`, its key figures, explanation and tutorial log, as one offline HTML page."""
    config = trace.config
    heading = (f"DataParallel run: {config.data_size:,} rows in batches of {config.batch_size:,} "
               f"on {plural(config.gpus, 'GPU')}, {MODEL_SPECS[config.model].label}, {INPUT_SPECS[config.inputs].label}")
    table = summary_table(trace).to_html(index=False, border=0, escape=True)
    paragraphs = "\n".join(f"<p>{markdown_to_html(p)}</p>" for p in explain(trace))
    last = len(trace.batches) - 1
    chunks = chunks_per_batch(trace)
    flows = [_figure_html(flow_figure(trace, 0), "flow-batch-0")]
    if last > 0 and chunks[last] != chunks[0]:  # the short last batch usually splits differently
        flows.append(_figure_html(flow_figure(trace, last), f"flow-batch-{last}"))
    # Memory is sampled for the first and the last batch; show the last too when it splits differently.
    sampled = memory_batches(trace)
    memories = [_figure_html(memory_figure(trace, b), f"memory-batch-{b}")
                for b in sampled if b == sampled[0] or chunks[b] != chunks[sampled[0]]]
    given = [_figure_html(inputs_figure(trace, b), f"inputs-batch-{b}") for b in argument_batches(trace)]
    sections = [
        _section("summary", "Key figures", table),
        _section("explanation", "What happened and why", paragraphs),
        _section("flow", "Flow of a batch", "\n".join(flows)),
        _section("split", "Split per batch", _figure_html(split_figure(trace), "split")),
        _section("timeline", "Timeline", _figure_html(timeline_figure(trace), "timeline")),
        *([_section("inputs", "What each GPU received", "\n".join(given))] if given else []),
        *([_section("memory", "Memory per GPU", "\n".join(memories))] if memories else []),
        _section("sample-map", "Sample map", _figure_html(sample_map_figure(trace), "sample-map")),
        _section("step", "Step through the batches", _figure_html(step_figure(trace), "step")),
        _section("log", "Tutorial log", f"<pre>{html.escape(bounded_log(trace))}</pre>"),
    ]
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
