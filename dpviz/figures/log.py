"""The tutorial log as the page and the report show it: cut to its first and last lines past MAX_LOG_LINES,
so a 10,000-batch run still gives a block a browser shows."""
from __future__ import annotations

from dpviz.trace import Trace
from dpviz.exports.tutorial_log import tutorial_log
from dpviz.analysis.wording import plural

MAX_LOG_LINES = 2_000


def bounded_log(trace: Trace, max_lines: int = MAX_LOG_LINES) -> str:
    """The tutorial log, or its first and last lines with a note of how many were left out."""
    lines = tutorial_log(trace).splitlines()
    if len(lines) <= max_lines:
        return "\n".join(lines)
    head, tail = lines[: max_lines // 2], lines[-(max_lines // 2) :]
    skipped = len(lines) - len(head) - len(tail)
    return "\n".join(head + [f"… {plural(skipped, 'line')} left out of this report …"] + tail)
