"""Text from a URL, a flag or a file, shown as text: never as markdown, HTML, a link or an image.

    echo("x" * 500)          # "'xxx…'": how a visitor's value is named in a sentence, cut short
    cut(text, 40)            # `text`, at most 40 characters, cut after a whole word, then " …"
    markdown_text(text)      # markdown that Streamlit renders exactly as `text`
    code_span(text)          # `text` in a markdown code span that the text cannot close
    plotly_text(text)        # `text` for plotly's labels, hovers, titles and for HTML

Cut a value where it goes into a sentence, before escaping it: the sentence stays whole and an
escape is never cut in half. Nothing here imports Streamlit, so the CLI and the tests use it too.
"""
from __future__ import annotations

import html
import re
from typing import Any

LIMIT = 80  # characters of a value named in a sentence: a setting, a file name, a device name
MESSAGE_LIMIT = 300  # characters of an error or a warning quoted from a run: a real one's line fits
ELLIPSIS = "…"
_SPACE = re.compile(r"\s")
# Invisible, and not a line-break opportunity. Streamlit turns some plain text into links, emoji
# and icons after markdown escapes are resolved (GFM's www., http:// and e-mail autolinks, :smile:,
# :material/icon:); a word joiner after the ':' or '@', or inside 'www.', keeps them text.
WORD_JOINER = "\u2060"
_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character, all escapable in CommonMark
_LINE_BREAK = re.compile(r"\r\n?|\n")
_SURROGATE = re.compile(r"[\ud800-\udfff]")  # a lone surrogate (from JSON's \ud800) cannot be sent as UTF-8
_BACKTICKS = re.compile(r"`+")
_WWW = re.compile(r"(www)(\\\.)", re.IGNORECASE)


def _whole_words(text: str, room: int) -> str | None:
    """`text`'s opening words that fit `room` characters with " …" after them, or None when that would
    drop more than half of the room: one long token (a path, a number, 'xxxx…') is better cut inside."""
    spaces = [m.start() for m in _SPACE.finditer(text, 0, max(0, room - 1))]
    head = text[: spaces[-1]].rstrip() if spaces else ""
    return head if head and len(head) >= room // 2 else None


def cut(text: Any, limit: int | None = LIMIT) -> str:
    """`text` as a string of at most `limit` characters. Where it is cut, it ends on a whole word and " …" (a
    reader sees a sentence left off, not a word cut in two, "iteratio…"), or inside one long token."""
    text = str(text)
    if limit is None or len(text) <= limit:
        return text
    head = _whole_words(text, limit)
    return text[: max(0, limit - 1)] + ELLIPSIS if head is None else head + " " + ELLIPSIS


def echo(value: Any, limit: int = LIMIT) -> str:
    """How a visitor's value is named in a sentence: its repr (quoted, control characters escaped), cut."""
    shown = repr(value)
    if len(shown) <= limit:
        return shown
    if not isinstance(value, str):
        return cut(shown, limit)
    keep = min(len(value), limit)  # a string stays quoted: cut inside the quotes
    while keep and len(repr(value[:keep])) > limit - 1:
        keep -= 1
    head = _whole_words(value[: keep + 1], keep + 1)  # the characters that fit, " …" after them
    if head is None:
        quoted = repr(value[:keep])
        return quoted[:-1] + ELLIPSIS + quoted[-1]
    quoted = repr(head)
    return quoted[:-1] + " " + ELLIPSIS + quoted[-1]


def _plain(text: Any, limit: int | None) -> str:
    """`text` cut, on one line (a sentence's value never starts a paragraph), without lone surrogates."""
    return _SURROGATE.sub("\ufffd", _LINE_BREAK.sub(" ", cut(text, limit)))


def markdown_text(text: Any, limit: int | None = None) -> str:
    """Markdown that renders exactly as `text` (cut to `limit`, line breaks as spaces): every ASCII
    punctuation character backslash-escaped, and no link, emoji or icon Streamlit would make of it."""
    escaped = _PUNCTUATION.sub(r"\\\1", _plain(text, limit))
    escaped = escaped.replace("\\:", "\\:" + WORD_JOINER).replace("\\@", "\\@" + WORD_JOINER)
    return _WWW.sub(r"\1" + WORD_JOINER + r"\2", escaped)


def code_span(text: Any, limit: int | None = None) -> str:
    """`text` (cut to `limit`, line breaks as spaces) in a markdown code span it cannot close: the
    fence is one backtick longer than the longest run inside, padded when the text starts or ends
    with a backtick or a space (CommonMark strips one space from each end)."""
    # Streamlit rewrites ':material/' to ':material_' everywhere before parsing, code spans included.
    text = _plain(text, limit).replace(":material/", ":" + WORD_JOINER + "material/")
    if not text:
        return "` `"
    fence = "`" * (1 + max((len(run) for run in _BACKTICKS.findall(text)), default=0))
    pad = " " if text.strip() and (text[0] in "` " or text[-1] in "` ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def plotly_text(text: Any, limit: int | None = None) -> str:
    """`text` (cut to `limit`, line breaks as spaces) for plotly, which reads <b>, <br>, <a href>,
    <span style> and entities in every label, hover, title and annotation: '<', '>' and '&' as
    entities, which plotly shows as the characters. The result is HTML-escaped text too."""
    return html.escape(_plain(text, limit), quote=False)


def one_line(message: str, limit: int = MESSAGE_LIMIT) -> str:
    """A message from a run as the last line quotes it: its first line, control characters escaped, cut."""
    first = (message.strip().splitlines() or [""])[0]
    return cut("".join(c if c.isprintable() else repr(c)[1:-1] for c in first), limit)
