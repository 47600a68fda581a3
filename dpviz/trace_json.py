"""Traces to and from JSON. Loading checks everything: a file may come from anyone.

`loads` rejects malformed JSON, unknown schema versions and inconsistent content with a TraceError
whose message is one sentence naming what is wrong and what is allowed. Nothing is ever unpickled or
executed. What a file may cost is bounded before it is parsed, by counts on its raw text against the
largest trace a run can make; after parsing every number must lie within what a real run produces and
every string is capped and valid UTF-8, so that a trace that loads draws every view.
"""
from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from .config import LIMITS, MAX_BATCHES, ConfigError, RunConfig
from .engines.dp.memory import CATEGORIES, MEASURED
from .trace import (
    HOST_PHASES, PHASES, SCHEMA_VERSION, ArgumentSample, Batch, Failure, Lane, MemorySample, Span, Trace, WarningNote,
)
from .engines.dp.check import replica_rows

MAX_TRACE_BYTES = 64 * 1024 * 1024
BACKEND_NAMES = ("cuda", "simulated")

# Strings: at most this many characters each. A message is what Python printed (a traceback is a
# few thousand characters); the others are names dpviz or torch make, a few dozen characters long.
MAX_TEXT = 20_000  # characters of an error message or warning kept from a file
MAX_LANE_NAME = 200  # "cuda:3 NVIDIA H200", "simulated device 3"
MAX_THREAD_NAME = 100  # "Thread-149998 (worker)", "MainThread"
MAX_TORCH_VERSION = 64  # "2.13.0+cu128"
MAX_ARGUMENT_TEXT = 100  # a path ("batch['weight']", "scale=") or a kind ("list of int")
MAX_NAME = 100  # a warning's category or an exception's type: a Python class name
MAX_SETTING_TEXT = 32  # a config value that is a word: a model, an input form, a backend

# Numbers: what a real run can produce, with room to spare.
MAX_SECONDS = 7 * 24 * 3600  # a span's start and end: a week, where a largest run takes minutes
MAX_MEMORY_BYTES = 2**48  # 256 TiB, past any device's memory; sums of samples stay far inside int64
MAX_DEVICES = LIMITS["gpus"][1]
MAX_ROWS = LIMITS["data_size"][1]  # rows of a batch or a chunk, and the largest dimension of a shape
MAX_DIMS = 8  # a shape's dimensions: dpviz's models take at most 4 (a batch of images)
MAX_MACHINE_GPUS = 1024  # CUDA devices of the recording machine: more than one machine has
MAX_WARNINGS = 16  # distinct warnings of a run: dpviz's models raise one at most
MAX_ARGUMENT_PARTS = 8  # arguments (or tensors inside one) a replica receives: dpviz's forms pass two
MAX_LOSS = 1e12  # a loss sample's magnitude: dpviz's losses on random data are near 1
MAX_LOSS_SAMPLES = 3  # losses are sampled for the first and the last batch

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
SHOWN = 40  # characters of an offending value quoted in an error message

_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"', re.DOTALL)  # a JSON string, escapes and all
_STRING_TEXT = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_NON_ASCII = re.compile(rb"[\x80-\xff]+")
_BOM = "\ufeff"


class TraceError(ValueError):
    """A trace file is unreadable or inconsistent; the message says what and where."""


def to_dict(trace: Trace) -> dict[str, Any]:
    return {
        "format": "dpviz-trace",
        "version": trace.version,
        "backend": trace.backend,
        "torch_version": trace.torch_version,
        "machine_gpus": trace.machine_gpus,
        "output_device": trace.output_device,
        "config": trace.config.to_dict(),
        "lanes": [dataclasses.asdict(lane) for lane in trace.lanes],
        "batches": [dataclasses.asdict(batch) for batch in trace.batches],
        **_span_table(trace.spans),
        "memory_kind": trace.memory_kind,
        "memory_fields": MEMORY_FIELDS,
        "memory": [[getattr(m, name) for name in MEMORY_FIELDS] for m in trace.memory],
        "argument_fields": ARGUMENT_FIELDS,
        "arguments": [[getattr(a, name) for name in ARGUMENT_FIELDS] for a in trace.arguments],
        "failure": dataclasses.asdict(trace.failure) if trace.failure else None,
        "warnings": [dataclasses.asdict(w) for w in trace.warnings],
        "facts": trace.facts,
    }


SPAN_FIELDS = [f.name for f in dataclasses.fields(Span)]
MEMORY_FIELDS = [f.name for f in dataclasses.fields(MemorySample)]
MEMORY_KINDS = ("computed", "measured")
ARGUMENT_FIELDS = [f.name for f in dataclasses.fields(ArgumentSample)]
ARGUMENT_MODES = ("split", "shared", "copied")
READABLE_VERSIONS = (1, SCHEMA_VERSION)  # version 1 files predate models, input forms and failures
REPLICA_PHASES = ("forward", "backward")  # a span per replica; the others run once per batch
TRAINING_PHASES = ("loss", "backward", "reduce", "step")
LOSS_KEYS = ["batch", "chunk_rows", "gathered", "whole"]


def _span_table(spans: list[Span]) -> dict[str, Any]:
    """Spans as rows of values under one list of field names: a 10,000-batch run has 200,000 spans,
    and repeating every key (and thread name) would triple the file. Times keep 0.1 us."""
    threads: dict[str, int] = {}
    rows = []
    for span in spans:
        row = [getattr(span, name) for name in SPAN_FIELDS]
        row[SPAN_FIELDS.index("start")] = round(span.start, 7)
        row[SPAN_FIELDS.index("end")] = round(span.end, 7)
        if span.thread is not None:
            row[SPAN_FIELDS.index("thread")] = threads.setdefault(span.thread, len(threads))
        rows.append(row)
    return {"span_fields": SPAN_FIELDS, "threads": list(threads), "spans": rows}


def dumps(trace: Trace) -> str:
    return json.dumps(to_dict(trace), separators=(",", ":"))


def loads(text: str | bytes) -> Trace:
    """Parse and check a trace; raise TraceError with one clear sentence if anything is off."""
    if len(text) > MAX_TRACE_BYTES:
        raise TraceError(f"the file is {len(text) / 2**20:.1f} MiB; traces are limited to {MAX_TRACE_BYTES // 2**20} MiB.")
    _check_counts(text)
    _check_strings(text)
    return from_dict(_parse(text))


def _parse(text: str | bytes) -> Any:
    """The JSON value of `text`; any text made here on the way is gone when it returns."""
    if isinstance(text, (bytes, bytearray)) and not text.isascii():
        text = _escaped(text).decode("ascii")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:  # JSONDecodeError, bad UTF-8, huge numbers, deep nesting
        raise TraceError(f"the file is not valid JSON ({_first_line(error)}).") from None


def _first_line(error: Exception) -> str:
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return text[:120].rstrip(".")


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


def from_dict(data: Any) -> Trace:
    """The trace `data` (parsed JSON) holds, checked; its span rows are consumed as they are read."""
    if not isinstance(data, dict) or data.get("format") != "dpviz-trace":
        raise TraceError("the file is JSON but not a dpviz trace (no \"format\": \"dpviz-trace\").")
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version not in READABLE_VERSIONS:
        raise TraceError(f"trace version {_shown(version)} is not supported; this dpviz reads versions "
                         f"{' and '.join(map(str, READABLE_VERSIONS))}.")
    try:
        trace = _build(data)
    except ConfigError as error:
        raise TraceError(f"the trace's config is invalid: {error}") from None
    except (KeyError, TypeError, ValueError) as error:
        if isinstance(error, TraceError):
            raise
        raise TraceError(f"the trace is missing or has a malformed field ({_describe(error)}).") from None
    check(trace)
    return trace


def _describe(error: Exception) -> str:
    return f"field {_shown(error.args[0])}" if isinstance(error, KeyError) else _first_line(error)


def _shown(value: Any) -> str:
    """A value as an error message quotes it: short, on one line, any lone surrogate escaped."""
    if isinstance(value, (list, dict)):
        return f"a {type(value).__name__} of {len(value):,} items"
    text = repr(value[:SHOWN + 1] if isinstance(value, str) else value)
    return text if len(text) <= SHOWN else text[:SHOWN] + "…"


def _typed(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        name = " or ".join(k.__name__ for k in kind) if isinstance(kind, tuple) else kind.__name__
        raise TraceError(f"{where} should be {name}, got {type(value).__name__}.")
    return value


def _int(value: Any, where: str, low: int, high: int) -> int:
    """A whole number from low to high."""
    _typed(value, int, where)
    if not low <= value <= high:
        raise TraceError(f"{where} must be between {low:,} and {high:,}, got {_shown(value)}.")
    return value


def _optional_int(value: Any, where: str, low: int, high: int) -> int | None:
    return None if value is None else _int(value, where, low, high)


def _ints(value: Any, where: str, low: int, high: int) -> list[int]:
    """A list of whole numbers from low to high."""
    _typed(value, list, where)
    if not set(map(type, value)) <= {int}:  # at C speed: a batch can hold 1,000,000 rows
        kind = next(type(item).__name__ for item in value if type(item) is not int)
        raise TraceError(f"{where} should hold whole numbers, got {kind}.")
    if value and not low <= min(value) <= max(value) <= high:
        bad = next(item for item in value if not low <= item <= high)
        raise TraceError(f"{where} must hold numbers between {low:,} and {high:,}, got {_shown(bad)}.")
    return value


def _shape(value: Any, where: str, known: dict[tuple, list[int]]) -> list[int]:
    """A tensor's shape: at most MAX_DIMS sizes from 1 to MAX_ROWS ([] for a 0-dim tensor, a plain value
    or a failed batch's missing output). Equal shapes share one list, as the recorder's do, so 150,000
    spans do not hold 150,000 copies."""
    if type(value) is list and len(value) <= MAX_DIMS and all(type(n) is int for n in value):
        shared = known.get(tuple(value))
        if shared is not None:
            return shared
    if len(_typed(value, list, where)) > MAX_DIMS:
        raise TraceError(f"{where} has {len(value):,} dimensions; tensors here have at most {MAX_DIMS}.")
    _ints(value, where, 1, MAX_ROWS)
    return known.setdefault(tuple(value), value)


def _text(value: Any, where: str, most: int = MAX_TEXT) -> str:
    """A string of at most `most` characters that is valid UTF-8 (JSON's \\ud800 makes a lone surrogate)."""
    _typed(value, str, where)
    if len(value) > most:
        raise TraceError(f"{where} is {len(value):,} characters long; at most {most:,} are allowed.")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise TraceError(f"{where} holds a lone surrogate ({_shown(value[error.start])}); text must be valid UTF-8.") from None
    return value


def _choice(value: Any, where: str, choices: tuple[str, ...]) -> str:
    """One of `choices`, as the constant itself: 190,000 spans share one "forward"."""
    for choice in choices:
        if value == choice and type(value) is str:
            return choice
    raise TraceError(f"{where} must be one of {', '.join(choices)}, got {_shown(value)}.")


def _number(value: Any, where: str, low: float, high: float) -> float:
    """A finite number from low to high."""
    _typed(value, (int, float), where)
    if not low <= value <= high:  # also false for NaN
        raise TraceError(f"{where} must be a number between {low:,g} and {high:,g}, got {_shown(value)}.")
    return value


def _dict(value: Any, where: str) -> dict:
    return _typed(value, dict, where)


def _list(value: Any, where: str, most: int | None = None) -> list:
    _typed(value, list, where)
    if most is not None and len(value) > most:
        raise TraceError(f"{where} holds {len(value):,} items; a trace holds at most {most:,}.")
    return value


def _config(values: Any) -> RunConfig:
    """The run's settings; each is a short name with a short word, a boolean or an int64 before
    RunConfig checks it, so its sentence quotes nothing long."""
    for name, value in _dict(values, "config").items():
        if len(name) > MAX_SETTING_TEXT:
            raise TraceError(f"the trace's config holds an unknown setting {_shown(name)}.")
        if isinstance(value, str):
            _text(value, f"config setting {name!r}", MAX_SETTING_TEXT)
        elif not isinstance(value, int):
            raise TraceError(f"config setting {name!r} should be a whole number, a word or true/false, "
                             f"got {type(value).__name__}.")
        elif not -2**63 <= value < 2**63:
            raise TraceError(f"config setting {name!r} must be an int64, got {_shown(value)}.")
    return RunConfig.from_dict(values)


def _build(data: dict[str, Any]) -> Trace:
    config = _config(data["config"])
    lanes = [
        Lane(_int(_dict(lane, "a lane")["id"], "lane id", 0, MAX_DEVICES - 1), _text(lane["name"], "lane name", MAX_LANE_NAME))
        for lane in _list(data["lanes"], "lanes", MAX_DEVICES)
    ]
    batches = [_batch(_dict(b, "a batch"), config) for b in _list(data["batches"], "batches", config.num_batches)]
    return Trace(
        config=config,
        backend=_choice(data["backend"], "backend", BACKEND_NAMES),
        torch_version=_text(data["torch_version"], "torch_version", MAX_TORCH_VERSION),
        machine_gpus=_int(data["machine_gpus"], "machine_gpus", 0, MAX_MACHINE_GPUS),
        output_device=_int(data["output_device"], "output_device", 0, MAX_DEVICES - 1),
        lanes=lanes,
        batches=batches,
        spans=_spans(data),
        memory=_memory(data),
        memory_kind=_choice(data["memory_kind"], "memory_kind", MEMORY_KINDS),
        **(_outcome(data) if data["version"] >= 2 else {}),
    )


def _batch(b: dict[str, Any], config: RunConfig) -> Batch:
    known: dict[tuple, list[int]] = {}
    return Batch(
        index=_int(b["index"], "batch index", 0, MAX_BATCHES - 1),
        sample_ids=_ints(b["sample_ids"], "batch sample_ids", 0, config.data_size - 1),
        input_shape=_shape(b["input_shape"], "batch input_shape", known),
        output_shape=_shape(b["output_shape"], "batch output_shape", known),
    )


def _outcome(data: dict[str, Any]) -> dict[str, Any]:
    """The fields schema version 2 added: arguments, failure, warnings and facts."""
    failure = data["failure"]
    if failure is not None:
        _dict(failure, "failure")
        failure = Failure(_int(failure["batch"], "failure batch", -2**63, 2**63 - 1),  # checked against the batches
                          _text(failure["type"], "failure type", MAX_NAME),
                          _text(failure["message"], "failure message"),
                          _optional_int(failure["replica"], "failure replica", 0, MAX_DEVICES - 1))
    notes = [
        WarningNote(_text(w["category"], "warning category", MAX_NAME), _text(w["message"], "warning message"),
                    _int(w["batch"], "warning batch", 0, MAX_BATCHES - 1),
                    _int(w["count"], "warning count", 1, MAX_BATCHES * (MAX_DEVICES + 1)))
        for w in (_dict(w, "a warning") for w in _list(data["warnings"], "warnings", MAX_WARNINGS))
    ]
    return {"arguments": _arguments(data), "failure": failure, "warnings": notes, "facts": _facts(data["facts"])}


def _arguments(data: dict[str, Any]) -> list[ArgumentSample]:
    """What each replica received: sampled for at most three batches, a few parts per replica."""
    most = len(("first", "last", "failed")) * MAX_DEVICES * MAX_ARGUMENT_PARTS
    known: dict[tuple, list[int]] = {}
    arguments = []
    for batch, replica, lane, path, kind, shape, mode in _rows(data, "arguments", "argument_fields", ARGUMENT_FIELDS,
                                                               "an argument", most):
        arguments.append(ArgumentSample(
            _int(batch, "argument batch", 0, MAX_BATCHES - 1), _int(replica, "argument replica", 0, MAX_DEVICES - 1),
            _int(lane, "argument lane", 0, MAX_DEVICES - 1), _text(path, "argument path", MAX_ARGUMENT_TEXT),
            _text(kind, "argument kind", MAX_ARGUMENT_TEXT),
            _shape(shape, "argument shape", known),
            _choice(mode, "argument mode", ARGUMENT_MODES),
        ))
    return arguments


def _facts(facts: Any) -> dict[str, Any]:
    """Model-specific findings, rebuilt from the checked values only."""
    _dict(facts, "facts")
    unknown = sorted(str(key) for key in set(facts) - {"state", "losses"})
    if unknown:
        raise TraceError(f"facts holds {_shown(unknown[0])}; only 'state' and 'losses' are known.")
    out: dict[str, Any] = {}
    if "state" in facts:
        state = _dict(facts["state"], "facts state")
        if state and sorted(state) != ["calls", "rows_seen"]:
            raise TraceError(f"facts state should hold 'calls' and 'rows_seen', got {_shown(sorted(map(str, state))[0])}.")
        out["state"] = {}
        for name, pair in state.items():
            if len(_ints(pair, f"facts state {name!r}", 0, MAX_ROWS)) != 2:
                raise TraceError(f"facts state {name!r} should be [after the run, one device], got {_shown(pair)}.")
            out["state"][name] = list(pair)
    if "losses" in facts:
        out["losses"] = [_loss(loss) for loss in _list(facts["losses"], "facts losses", MAX_LOSS_SAMPLES)]
    return out


def _loss(loss: Any) -> dict[str, Any]:
    """One loss sample: the gathered per-replica losses, their chunks' rows and the whole batch's loss."""
    _dict(loss, "a loss sample")
    if sorted(map(str, loss)) != LOSS_KEYS:
        raise TraceError(f"a loss sample should hold {', '.join(LOSS_KEYS)}, got {_shown(sorted(map(str, loss)))}.")
    gathered = _list(loss["gathered"], "gathered losses", MAX_DEVICES)
    for value in gathered:
        _number(value, "a gathered loss", -MAX_LOSS, MAX_LOSS)
    rows = _ints(loss["chunk_rows"], "loss chunk_rows", 0, MAX_ROWS)
    if not gathered or len(rows) != len(gathered):
        raise TraceError("a loss sample needs one gathered loss per chunk, and at least one.")
    return {"batch": _int(loss["batch"], "loss batch", 0, MAX_BATCHES - 1), "gathered": list(gathered),
            "chunk_rows": list(rows), "whole": _number(loss["whole"], "the whole-batch loss", -MAX_LOSS, MAX_LOSS)}


def _rows(data: dict[str, Any], key: str, fields_key: str, fields: list[str], what: str, most: int) -> list[list]:
    """The rows stored under `key`, each a list of len(fields) values, the fields named under `fields_key`."""
    if _typed(data[fields_key], list, fields_key) != fields:
        raise TraceError(f"{fields_key} should be {fields}, got {_shown(data[fields_key])}.")
    rows = _list(data[key], key, most)
    for raw in rows:
        _typed(raw, list, what)
        if len(raw) != len(fields):
            raise TraceError(f"{what} has {len(raw):,} values; there should be {len(fields)}.")
    return rows


def _memory(data: dict[str, Any]) -> list[MemorySample]:
    """Memory after each phase of the first and the last batch, per device and kind of tensor."""
    most = 2 * len(PHASES) * MAX_DEVICES * len(CATEGORIES)
    return [
        MemorySample(_int(batch, "memory sample batch", 0, MAX_BATCHES - 1), _choice(phase, "memory sample phase", PHASES),
                     _int(lane, "memory sample lane", 0, MAX_DEVICES - 1),
                     _choice(category, "memory sample category", (*CATEGORIES, MEASURED)),
                     _int(size, "memory sample bytes", 0, MAX_MEMORY_BYTES))
        for batch, phase, lane, category, size in _rows(data, "memory", "memory_fields", MEMORY_FIELDS, "a memory sample", most)
    ]


def _spans(data: dict[str, Any]) -> list[Span]:
    fields = _typed(data["span_fields"], list, "span_fields")
    if fields != SPAN_FIELDS:
        raise TraceError(f"span_fields should be {SPAN_FIELDS}, got {_shown(fields)}.")
    raw_spans = _list(data["spans"], "spans")
    threads = _list(data["threads"], "threads", len(raw_spans))  # each thread ran a span
    for name in threads:
        _text(name, "a thread name", MAX_THREAD_NAME)
    known: dict[tuple, list[int]] = {}
    spans = []
    for position, raw in enumerate(raw_spans):
        spans.append(_plain_span(raw, threads, known) or _span(raw, threads, known))
        # Each row is let go as its span is made: a 200,000-span file's rows would otherwise outlive the
        # parse beside the spans made from them, and loading would peak twice as high.
        raw_spans[position] = None
    return spans


_PHASE_NAMES = {phase: phase for phase in PHASES}


def _plain_span(raw: Any, threads: list[str], known: dict[tuple, list[int]]) -> Span | None:
    """The span, if every value is plainly in range and its shapes are ones already seen; else None and
    _span reads it again to say what is wrong. A 10,000-batch file has 200,000 spans: this is the fast way."""
    try:
        phase, batch, start, end, lane, replica, row_offset, rows, input_shape, output_shape, thread, order = raw
        if not (type(raw) is list and type(phase) is str and phase in _PHASE_NAMES and type(batch) is int
                and 0 <= batch < MAX_BATCHES and type(start) in (int, float) and type(end) in (int, float)
                and 0 <= start <= end <= MAX_SECONDS and type(row_offset) is int and 0 <= row_offset < 2**63
                and type(rows) is int and 0 <= rows < 2**63
                and (lane is None or type(lane) is int and 0 <= lane < MAX_DEVICES)
                and (replica is None or type(replica) is int and 0 <= replica < MAX_DEVICES)
                and (order is None or type(order) is int and 0 <= order < MAX_DEVICES)
                and (thread is None or type(thread) is int and 0 <= thread < len(threads))
                and (input_shape is None or type(input_shape) is list)
                and (output_shape is None or type(output_shape) is list)):
            return None
        shapes = (input_shape if input_shape is None else known.get(tuple(input_shape)),
                  output_shape if output_shape is None else known.get(tuple(output_shape)))
        if (shapes[0] is None) != (input_shape is None) or (shapes[1] is None) != (output_shape is None):
            return None
    except (TypeError, ValueError):  # not a list of twelve, or a shape holding lists
        return None
    return Span(_PHASE_NAMES[phase], batch, start, end, lane, replica, row_offset, rows, shapes[0], shapes[1],
                None if thread is None else threads[thread], order)


def _span(raw: Any, threads: list[str], known: dict[tuple, list[int]]) -> Span:
    if type(raw) is not list or len(raw) != len(SPAN_FIELDS):
        raise TraceError(f"a span should be a list of {len(SPAN_FIELDS)} values, got {_shown(raw)}.")
    phase, batch, start, end, lane, replica, row_offset, rows, input_shape, output_shape, thread, order = raw
    where = "a span"
    if not (type(start) in (int, float) and type(end) in (int, float) and 0 <= start <= end <= MAX_SECONDS):
        raise TraceError(f"a span's start and end must be times from 0 to {MAX_SECONDS:,} seconds (a week), start "
                         f"first; got {_shown(start)} and {_shown(end)}.")
    return Span(
        phase=_choice(phase, f"{where}'s phase", PHASES),
        batch=_int(batch, f"{where}'s batch", 0, MAX_BATCHES - 1),
        start=start,
        end=end,
        lane=_optional_int(lane, f"{where}'s lane", 0, MAX_DEVICES - 1),
        replica=_optional_int(replica, f"{where}'s replica", 0, MAX_DEVICES - 1),
        # Checked against the span's batch: within int64 here, so that check's sentence stays short.
        row_offset=_int(row_offset, f"{where}'s row_offset", 0, 2**63 - 1),
        rows=_int(rows, f"{where}'s rows", 0, 2**63 - 1),
        input_shape=None if input_shape is None else _shape(input_shape, "a span's input_shape", known),
        output_shape=None if output_shape is None else _shape(output_shape, "a span's output_shape", known),
        thread=None if thread is None else threads[_int(thread, "a span's thread", 0, len(threads) - 1)],
        order=_optional_int(order, f"{where}'s order", 0, MAX_DEVICES - 1),
    )


def check(trace: Trace) -> None:
    """Raise TraceError unless the trace is internally consistent."""
    config = trace.config
    if trace.backend not in BACKEND_NAMES:
        raise TraceError(f"backend must be one of {', '.join(BACKEND_NAMES)}, got {_shown(trace.backend)}.")
    if not 0 <= trace.machine_gpus <= MAX_MACHINE_GPUS:
        raise TraceError(f"machine_gpus must be between 0 and {MAX_MACHINE_GPUS:,}, got {_shown(trace.machine_gpus)}.")
    if trace.memory_kind not in MEMORY_KINDS:
        raise TraceError(f"memory_kind must be one of {', '.join(MEMORY_KINDS)}, got {_shown(trace.memory_kind)}.")
    if (trace.memory_kind == "measured") != (trace.backend == "cuda"):
        raise TraceError(f"memory is {trace.memory_kind} but the backend is {trace.backend}; only real GPUs measure it.")
    lane_ids = [lane.id for lane in trace.lanes]
    if lane_ids != list(range(config.gpus)):
        raise TraceError(f"the trace has lanes {_shown(lane_ids) if len(lane_ids) > MAX_DEVICES else lane_ids} "
                         f"but its config asks for {config.gpus} devices.")
    if trace.output_device not in lane_ids:
        raise TraceError(f"output device {_shown(trace.output_device)} is not one of the lanes {lane_ids}.")
    _check_batches(trace)
    _check_spans(trace, lane_ids)
    _check_memory(trace, lane_ids)
    failure = trace.failure
    rows_of: dict[int, list[int]] = {}  # DataParallel's split of a batch size: the same for every full batch
    for batch in trace.batches:
        # A failing batch stops part-way: its split is not checked, only that its replicas fit the batch.
        _check_replicas(trace, batch, rows_of, split=failure is None or batch.index != failure.batch)
    _check_outcome(trace, lane_ids)


def _check_batches(trace: Trace) -> None:
    """The batches follow from the config: their number, sizes, shapes and dataset rows."""
    config, failure = trace.config, trace.failure
    if failure is None and len(trace.batches) != config.num_batches:
        raise TraceError(f"the trace has {len(trace.batches):,} batches but its config makes {config.num_batches:,}.")
    if failure is not None and not 0 <= failure.batch == len(trace.batches) - 1 < config.num_batches:
        raise TraceError(f"the run failed in batch {failure.batch:,}, which should be the trace's last of at most "
                         f"{config.num_batches:,} batches, but the trace has {len(trace.batches):,}.")
    expected_rows = [config.batch_size] * (config.num_batches - 1) + [config.data_size - config.batch_size * (config.num_batches - 1)]
    if [b.rows for b in trace.batches] != expected_rows[:len(trace.batches)]:
        raise TraceError(f"the batches' sizes do not follow from data_size {config.data_size:,} and batch_size {config.batch_size:,}.")
    seen = bytearray(config.data_size)
    for position, batch in enumerate(trace.batches):
        if batch.index != position:
            raise TraceError(f"batch {position:,} is numbered {batch.index:,}.")
        if len(batch.input_shape) <= config.dim or batch.input_shape[config.dim] != batch.rows:
            raise TraceError(f"batch {position:,} holds {batch.rows:,} rows but its input shape is {batch.input_shape}.")
        for sample in batch.sample_ids:  # in range: checked when read
            if seen[sample]:
                raise TraceError(f"batch {position:,} holds row {sample:,}, which an earlier batch holds too.")
            seen[sample] = 1


# Per phase: (runs on the host, runs per replica, part of training).
_PHASE_RULES = {phase: (phase in HOST_PHASES, phase in REPLICA_PHASES, phase in TRAINING_PHASES) for phase in PHASES}


def _check_spans(trace: Trace, lane_ids: list[int]) -> None:
    """Each span fits its batch, and each phase of a batch (each replica's, for forward and backward) is
    timed once: what DataParallel's one call per batch makes."""
    seen: set[tuple] = set()
    rows = [b.rows for b in trace.batches]
    lanes, train = len(lane_ids), trace.config.train
    for span in trace.spans:
        host, per_replica, training = _PHASE_RULES[span.phase]
        lane = span.lane
        fits = (span.batch < len(rows) and (lane is None) == host and (lane is None or lane < lanes)
                and (train or not training) and span.row_offset + span.rows <= rows[span.batch]
                and (span.replica == lane if per_replica else _plain(span))
                and (span.phase != "backward" or _gradient(span)))
        if not fits:
            _check_span(trace, span, lane_ids)  # says which rule it breaks
        key = (span.batch, span.phase, span.replica)
        if key in seen:
            who = f" of replica {span.replica}" if span.replica is not None else ""
            raise TraceError(f"batch {span.batch:,} has two {span.phase} spans{who}; a run times each once.")
        seen.add(key)


def _plain(span: Span) -> bool:
    """A span of a phase that runs once per batch holds its times, batch and lane only."""
    return (span.replica is None and span.order is None and span.input_shape is None and span.output_shape is None
            and span.thread is None and span.rows == 0 and span.row_offset == 0)


def _gradient(span: Span) -> bool:
    """A replica's backward holds the shape of the output gradient it received, and no output or order."""
    return span.input_shape is not None and span.output_shape is None and span.order is None


def _check_span(trace: Trace, span: Span, lane_ids: list[int]) -> None:
    where = f"a {span.phase!r} span of batch {span.batch:,}"
    if not 0 <= span.batch < len(trace.batches):
        raise TraceError(f"{where} refers to a batch that is not in the trace.")
    if span.lane is not None and span.lane not in lane_ids:
        raise TraceError(f"{where} runs on lane {span.lane}, which is not one of {lane_ids}.")
    if span.phase in REPLICA_PHASES and (span.lane is None or span.replica != span.lane):
        raise TraceError(f"{where} should name its replica and run on that replica's lane.")
    if span.phase not in REPLICA_PHASES and not _plain(span):
        raise TraceError(f"{where} names a replica, rows, shapes, a thread or an order; only forward and "
                         "backward spans do.")
    if span.phase == "backward" and not _gradient(span):
        raise TraceError(f"{where} should hold its output gradient's shape as input_shape, and no output_shape "
                         "or order.")
    if (span.phase in HOST_PHASES) != (span.lane is None):
        raise TraceError(f"{where} {'runs on a lane' if span.lane is not None else 'names no lane'}; "
                         f"only {', '.join(HOST_PHASES)} run on the host.")
    if span.phase in TRAINING_PHASES and not trace.config.train:
        raise TraceError(f"{where} is part of training, but the trace's config does not train.")
    if span.row_offset + span.rows > trace.batches[span.batch].rows:
        raise TraceError(f"{where} claims rows {span.row_offset:,}..{span.row_offset + span.rows:,} of a "
                         f"{trace.batches[span.batch].rows:,}-row batch, past the end.")


def _check_memory(trace: Trace, lane_ids: list[int]) -> None:
    """Memory is sampled once per kind of tensor after each phase of the first and the last batch."""
    categories = (MEASURED,) if trace.memory_kind == "measured" else CATEGORIES
    sampled = {0, trace.config.num_batches - 1}
    seen: set[tuple] = set()
    for m in trace.memory:
        key = (m.batch, m.phase, m.lane, m.category)
        if not (m.batch in sampled and m.batch < len(trace.batches) and m.lane in lane_ids and m.category in categories
                and key not in seen):
            raise TraceError(
                f"a memory sample ({m.bytes:,} bytes of {m.category!r} on lane {m.lane} after {m.phase!r} of batch "
                f"{m.batch:,}) does not fit the trace: memory is sampled once per kind of tensor for batches "
                f"{' and '.join(f'{b:,}' for b in sorted(sampled))}."
            )
        seen.add(key)


def _check_replicas(trace: Trace, batch: Batch, rows_of: dict[int, list[int]], split: bool = True) -> None:
    replicas = trace.replicas(batch.index)
    if not split:
        if [(s.replica, s.lane) for s in replicas] != [(i, i) for i in range(len(replicas))] \
                or len(replicas) > trace.config.gpus:
            raise TraceError(f"batch {batch.index:,}'s replicas are not one per device in device order.")
    if split and batch.rows not in rows_of:
        rows_of[batch.rows] = replica_rows(trace.config, batch.rows)
    expected = rows_of[batch.rows] if split else [s.rows for s in replicas]
    if [(s.replica, s.lane, s.rows) for s in replicas] != [(i, i, n) for i, n in enumerate(expected)]:
        raise TraceError(
            f"batch {batch.index:,}'s replicas got {[s.rows for s in replicas]} rows, but DataParallel splits "
            f"{batch.rows:,} rows over {trace.config.gpus} devices as {expected}."
        )
    end = 0
    for span in replicas:
        if span.row_offset < end or span.row_offset + span.rows > batch.rows:
            raise TraceError(
                f"replica {span.replica} of batch {batch.index:,} claims rows {span.row_offset:,}..{span.row_offset + span.rows:,} "
                f"of a {batch.rows:,}-row batch, overlapping another replica or past the end."
            )
        end = span.row_offset + span.rows


def _check_outcome(trace: Trace, lane_ids: list[int]) -> None:
    """Arguments, failure, warnings and facts fit the run: its batches, devices and sampled batches."""
    config, failure, count = trace.config, trace.failure, len(trace.batches)
    sampled = {0, config.num_batches - 1} | ({failure.batch} if failure else set())
    seen: set[tuple] = set()
    for a in trace.arguments:
        if not (a.batch in sampled and a.batch < count and a.lane in lane_ids and a.replica == a.lane
                and (a.batch, a.lane, a.path) not in seen):
            raise TraceError(f"an argument of replica {a.replica} on lane {a.lane} in batch {a.batch:,} does not fit "
                             "the trace: arguments are sampled once per replica for the first, last and failed batch.")
        seen.add((a.batch, a.lane, a.path))
    parts: dict[tuple, int] = {}
    for a in trace.arguments:
        parts[(a.batch, a.lane)] = parts.get((a.batch, a.lane), 0) + 1
    if parts and max(parts.values()) > MAX_ARGUMENT_PARTS:
        raise TraceError(f"a replica received {max(parts.values())} arguments; a trace records at most {MAX_ARGUMENT_PARTS}.")
    if failure is not None and failure.replica is not None and failure.replica not in lane_ids:
        raise TraceError(f"the failure names replica {failure.replica}, which is not one of the lanes {lane_ids}.")
    for w in trace.warnings:
        if not (0 <= w.batch < count and 1 <= w.count <= count * (len(lane_ids) + 1)):
            raise TraceError(f"a warning names batch {w.batch:,} ({w.count:,} times), which does not fit the trace: "
                             f"at most once per replica and call in each of its {count:,} batches.")
    _check_facts(trace)


def _check_facts(trace: Trace) -> None:
    """A counter's state counts at most every batch and row; losses are of sampled batches and their chunks."""
    state = trace.facts.get("state", {})
    config = trace.config
    for name, most in (("calls", config.num_batches), ("rows_seen", config.data_size)):
        if name in state and max(state[name]) > most:
            raise TraceError(f"facts state {name!r} must be between 0 and {most:,}, got {max(state[name]):,}.")
    for loss in trace.facts.get("losses", []):
        batch = loss["batch"]
        if batch >= len(trace.batches) or sum(loss["chunk_rows"]) > trace.batches[batch].rows \
                or len(loss["chunk_rows"]) > config.gpus:
            raise TraceError(f"a loss sample of batch {batch:,} with chunks {_shown(loss['chunk_rows'])} does not fit "
                             f"the trace's {len(trace.batches):,} batches on {config.gpus} devices.")
