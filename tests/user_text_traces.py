"""A trace file whose every free-text field holds markup, as anyone could upload: it must show as text.

`payload_dict()` is a real run's trace file (a failing kwargs batch on 8 GPUs, so it has a failure and
arguments), turned into a real-GPU trace (device names and measured memory), with links, images and
tags in its device names, torch version, thread names, argument names and kinds, failure and warning.
It still passes trace_json's checks; `payload_trace()` is it loaded.
"""
from __future__ import annotations

import re
import string
from collections import defaultdict
from functools import lru_cache

from dpviz import record
from dpviz.trace import json_io as trace_json
from dpviz.engines.dp.ledger import MEASURED
from dpviz.presets import PRESETS
from dpviz.trace import Trace

EVIL = "evil.example"
ANCHOR = f'<a href="http://{EVIL}/x">click</a>'
IMAGE = f"<img src=http://{EVIL}/i.png>"
LINK = f"[link](http://{EVIL})"
MD_IMAGE = f"![img](http://{EVIL}/i.png)"
BOLD = "<b>bold-evil</b>"
PAYLOADS = (ANCHOR, IMAGE, LINK, MD_IMAGE, BOLD)
ALL = " ".join(PAYLOADS)
# Markup that must never reach a page or a chart as markup.
MARKUP = (f'<a href="http://{EVIL}', f"<img src=http://{EVIL}", "<b>bold-evil", f"[link](http://{EVIL}",
          f"![img](http://{EVIL}")


@lru_cache(maxsize=None)
def _recorded() -> Trace:
    return record(PRESETS["kwargs-small-batch"].config)


def payload_dict() -> dict:
    """The trace file, as a dict ready for json.dumps."""
    data = trace_json.to_dict(_recorded())
    data["backend"], data["memory_kind"] = "cuda", "measured"
    data["lanes"] = [{"id": lane["id"], "name": f"cuda:{lane['id']} {ANCHOR} {LINK}"} for lane in data["lanes"]]
    data["torch_version"] = f"2.5.0 {MD_IMAGE}"  # trace files keep at most 64 characters of it
    data["threads"] = [f"{name} {IMAGE}" for name in data["threads"]]
    totals: dict[tuple, int] = defaultdict(int)  # a real GPU measures one total per device and phase
    for batch, phase, lane, _, size in data["memory"]:
        totals[(batch, phase, lane)] += size
    data["memory"] = [[batch, phase, lane, MEASURED, size] for (batch, phase, lane), size in totals.items()]
    data["arguments"] = [_argument(row) for row in data["arguments"]]
    failure = data["failure"]
    first, rest = failure["message"].split("\n", 1)
    failure["message"] = f"{first} {ANCHOR} {LINK}\n{rest} {IMAGE} {MD_IMAGE} {BOLD}"
    data["warnings"] = [{"category": f"UserWarning {BOLD}", "message": f"{ALL} `tick` ``two``", "batch": 0, "count": 2}]
    return data


def _argument(row: list) -> list:
    """An argument row with markup in the keyword's name and in a kind; positional `x` keeps its name."""
    batch, replica, lane, path, kind, shape, mode = row
    if path != "x":
        path = f"{LINK}{BOLD}="
    if kind != "tensor":
        kind = f"{IMAGE} of {ANCHOR}"
    return [batch, replica, lane, path, kind, shape, mode]


def payload_json() -> str:
    return trace_json.json.dumps(payload_dict())


def payload_trace() -> Trace:
    return trace_json.loads(payload_json())


def unescape_markdown(markdown: str) -> str:
    """The text an echo.markdown_text result renders as; fails on any punctuation left unescaped."""
    out, i = [], 0
    while i < len(markdown):
        char = markdown[i]
        if char == "\\":
            assert markdown[i + 1] in string.punctuation, markdown
            out.append(markdown[i + 1])
            i += 2
            continue
        assert char not in string.punctuation, f"unescaped {char!r} in {markdown!r}"
        out.append(char)
        i += 1
    return "".join(out)


def outside_code(markdown: str) -> str:
    """`markdown` without its code spans (CommonMark: a run of backticks, not escaped, closed by a run as long)."""
    out, i = [], 0
    for token in re.finditer(r"\\[\s\S]|(`+)", markdown):
        if token.start() < i or token.group(1) is None:  # inside a code span taken already, or an escape
            continue
        close = re.compile(rf"(?<!`){token.group(1)}(?!`)").search(markdown, token.end())
        if close is not None:
            out.append(markdown[i:token.start()])
            i = close.end()
    return "".join(out) + markdown[i:]
