"""What a trace file may cost to parse, bounded before it is parsed: a file may come from anyone.

    data = parse_bounded(raw)    # JSON value of raw (bytes or str), or TraceError with one sentence

Counts made at C speed on the raw text (containers, commas, quotes, string bytes, non-ASCII bytes)
against the largest trace a run can make keep what `json.loads` allocates near what that trace costs.
"""
from __future__ import annotations

import json
import re
from typing import Any

from dpviz.trace.values import TraceError, first_line

MAX_TRACE_BYTES = 64 * 1024 * 1024

# The raw file, before parsing. The largest trace the limits allow is forward only (training runs at
# most 1,000 batches): 10,000 batches (MAX_BATCHES) of a 1,000,000-row dataset on 16 devices. Recorded
# (data_size 1,000,000, batch_size 100, 16 GPUs, input_size 16: bench/bench_upload.py) it is 24.6 MB
# holding 190,000 spans, 150,000 thread names, 530,363 '[' and '{', 3,781,686 commas and 761,496 '"'
# (380,748 strings of 5.7 MB in all, the longest 24 bytes); json.loads takes 153 MB for it. At most
# 20 spans a batch with 4-dimensional shapes and text that fills every message make at most about
# 900,000 containers, 4.6 million commas and 1.2 million quotes. Each parsed list or dict costs at
# least 56 bytes and each value 8 or more, so these bounds keep what any file that passes them costs to
# parse near what that trace costs: 63 MB of '[],' would otherwise take 1.8 GB.
MAX_CONTAINERS = 1_000_000  # '[' and '{', those inside strings too
MAX_COMMAS = 5_000_000  # bounds the number of values
MAX_QUOTES = 1_500_000  # bounds the number of strings, and the time measuring them takes
MAX_STRING_BYTES = 256 * 1024  # one string in the file: a message of MAX_TEXT characters written as \u escapes
MAX_STRINGS_BYTES = 16 * 1024 * 1024  # all strings: thread names and phases (5.7 MB) and every message

# dpviz writes pure ASCII (\u escapes); an edited file may hold some UTF-8, which is escaped the same
# way before parsing, so one 4-byte character cannot make Python hold the whole text at 4 bytes a character.
MAX_NON_ASCII_BYTES = 64 * 1024
_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"', re.DOTALL)  # a JSON string, escapes and all
_STRING_TEXT = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_NON_ASCII = re.compile(rb"[\x80-\xff]+")
_BOM = "\ufeff"


def parse_bounded(text: str | bytes) -> Any:
    """The JSON value of `text`, its size and counts checked first; any text made on the way is gone when it returns."""
    if len(text) > MAX_TRACE_BYTES:
        raise TraceError(f"the file is {len(text) / 2**20:.1f} MiB; traces are limited to {MAX_TRACE_BYTES // 2**20} MiB.")
    _check_counts(text)
    _check_strings(text)
    if isinstance(text, (bytes, bytearray)) and not text.isascii():
        text = _escaped(text).decode("ascii")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:  # JSONDecodeError, bad UTF-8, huge numbers, deep nesting
        raise TraceError(f"the file is not valid JSON ({first_line(error)}).") from None


def _check_counts(text: str | bytes) -> None:
    """Bound what parsing can cost, from counts made at C speed on the raw text."""
    bracket, brace, comma, quote = ("[", "{", ",", '"') if isinstance(text, str) else (b"[", b"{", b",", b'"')
    for count, most, what in (
        (text.count(bracket) + text.count(brace), MAX_CONTAINERS, "lists and objects ('[' and '{')"),
        (text.count(comma), MAX_COMMAS, "commas"),
        (text.count(quote), MAX_QUOTES, "quotes"),
    ):
        if count > most:
            raise TraceError(f"the file holds {count:,} {what}; the largest trace a run can make holds at most {most:,}.")


def _check_strings(text: str | bytes) -> None:
    """Refuse a file with a string longer than any trace holds, or more text than any trace holds, before
    parsing makes a copy of it."""
    total = 0
    for match in (_STRING_TEXT if isinstance(text, str) else _STRING).finditer(text):
        start, end = match.span()
        if end - start > MAX_STRING_BYTES:
            raise TraceError(f"the file holds a string of {end - start:,} bytes at offset {start:,}; "
                             f"strings in a trace are at most {MAX_STRING_BYTES:,}.")
        total += end - start
    if total > MAX_STRINGS_BYTES:
        raise TraceError(f"the file's strings hold {total:,} bytes; a trace's hold at most {MAX_STRINGS_BYTES:,}.")


def _escaped(data: bytes) -> bytes:
    """UTF-8 text written as JSON \\u escapes, as dpviz writes it: the parsed text stays one byte a
    character. A leading byte order mark is dropped; bytes that are not UTF-8 are refused."""
    total = 0
    for match in _NON_ASCII.finditer(data):
        total += match.end() - match.start()
        if total > MAX_NON_ASCII_BYTES:
            raise TraceError(f"the file holds more than {MAX_NON_ASCII_BYTES:,} bytes of non-ASCII text; "
                             "at most that many are allowed (dpviz writes \\u escapes).")

    def escape(match: re.Match) -> bytes:
        try:
            text = match.group().decode("utf-8")
        except UnicodeDecodeError:
            raise TraceError(f"the file is not valid JSON (not UTF-8 at byte {match.start():,}).") from None
        if match.start() == 0:
            text = text.removeprefix(_BOM)
        return json.dumps(text)[1:-1].encode("ascii")

    return _NON_ASCII.sub(escape, data)
