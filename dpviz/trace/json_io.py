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
from typing import Any

from dpviz.config import MAX_BATCHES, ConfigError, RunConfig
from dpviz.engines import ENGINES, FIRST, vocabulary as vocabulary_of
from dpviz.trace import SCHEMA_VERSION, ArgumentSample, Batch, Failure, Lane, MemorySample, Span, Trace, WarningNote
from dpviz.trace.check import check
from dpviz.trace.vocabulary import Vocabulary
from dpviz.trace.cost import MAX_TRACE_BYTES, parse_bounded  # noqa: F401  the upload limit, named here too
from dpviz.trace.values import (  # noqa: F401  TraceError: what loading raises, named here too
    BACKEND_NAMES, MAX_GROUPS, MAX_MICROBATCHES, MAX_ARGUMENT_PARTS, MAX_ARGUMENT_TEXT, MAX_DEVICES, MAX_LANE_NAME,
    MAX_LOSS, MAX_LOSS_SAMPLES, MAX_MACHINE_GPUS, MAX_MEMORY_BYTES, MAX_NAME, MAX_ROWS, MAX_SECONDS,
    MAX_SETTING_TEXT, MAX_TEXT, MAX_THREAD_NAME, MAX_TORCH_VERSION, MAX_WARNINGS, MEMORY_KINDS, TraceError,
    choice_of, first_line, mapping, number, optional_whole, sequence, shape_of, shown, text_of, typed, whole, wholes,
)


SPAN_FIELDS = [f.name for f in dataclasses.fields(Span)]
# A file says which fields its spans hold (span_fields), so a field added or renamed needs no new schema version.
# Files written before the field was named group call it "bucket", in the same place; before spans had one (all of
# DataParallel's) they name two fields less; before they had a microbatch, one: what they leave out is None.
SPAN_FIELDS_NAMING_BUCKET = ["bucket" if name == "group" else name for name in SPAN_FIELDS]
SPAN_FIELDS_BEFORE_MICROBATCHES = [name for name in SPAN_FIELDS_NAMING_BUCKET if name != "microbatch"]
SPAN_FIELDS_BEFORE_BUCKETS = [name for name in SPAN_FIELDS_BEFORE_MICROBATCHES if name != "bucket"]
MEMORY_FIELDS = [f.name for f in dataclasses.fields(MemorySample)]
ARGUMENT_FIELDS = [f.name for f in dataclasses.fields(ArgumentSample)]
ARGUMENT_MODES = ("split", "shared", "copied")
# Version 1 predates models, input forms and failures; version 2 names no engine (it is DataParallel's).
READABLE_VERSIONS = (1, 2, SCHEMA_VERSION)


def to_dict(trace: Trace) -> dict[str, Any]:
    return {
        "format": "dpviz-trace",
        "version": trace.version,
        # The engine and its vocabulary's names: a reader knows which phases and memory kinds to expect.
        "engine": trace.engine,
        "phases": list(trace.vocabulary.names),
        "memory_kinds": list(trace.vocabulary.memory_names),
        "backend": trace.backend,
        "torch_version": trace.torch_version,
        "machine_gpus": trace.machine_gpus,
        "output_device": trace.output_device,
        "config": trace.config.to_dict(),
        "lanes": [dataclasses.asdict(lane) for lane in trace.lanes],
        "batches": [{**dataclasses.asdict(batch), "sample_ids": batch.sample_ids.tolist()} for batch in trace.batches],
        **_span_table(trace.spans),
        "memory_kind": trace.memory_kind,
        "memory_fields": MEMORY_FIELDS,
        "memory": [[getattr(m, name) for name in MEMORY_FIELDS] for m in trace.memory],
        "argument_fields": ARGUMENT_FIELDS,
        "arguments": [[getattr(a, name) for name in ARGUMENT_FIELDS] for a in trace.arguments],
        "failure": _failure_dict(trace.failure),
        "warnings": [dataclasses.asdict(w) for w in trace.warnings],
        "facts": trace.facts,
    }


def _failure_dict(failure: Failure | None) -> dict[str, Any] | None:
    """A failure's fields; its cause only where one was kept, so that a file written before it reads back the same."""
    if failure is None:
        return None
    fields = dataclasses.asdict(failure)
    return fields if failure.cause else {key: value for key, value in fields.items() if key != "cause"}


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
    return from_dict(parse_bounded(text))


def from_dict(data: Any) -> Trace:
    """The trace `data` (parsed JSON) holds, checked; its span rows are consumed."""
    if not isinstance(data, dict) or data.get("format") != "dpviz-trace":
        raise TraceError("the file is JSON but not a dpviz trace (no \"format\": \"dpviz-trace\").")
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version not in READABLE_VERSIONS:
        raise TraceError(f"trace version {shown(version)} is not supported; this dpviz reads versions "
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
    return f"field {shown(error.args[0])}" if isinstance(error, KeyError) else first_line(error)


def _config(values: Any) -> RunConfig:
    """The run's settings; each is a short name with a short word, a boolean, an int64, a float or null
    before RunConfig checks it, so its sentence quotes nothing long."""
    for name, value in mapping(values, "config").items():
        if len(name) > MAX_SETTING_TEXT:
            raise TraceError(f"the trace's config holds an unknown setting {shown(name)}.")
        if isinstance(value, str):
            text_of(value, f"config setting {name!r}", MAX_SETTING_TEXT)
        elif value is None or isinstance(value, float) and not isinstance(value, bool):
            continue  # a fraction or "unset" (DDP's bucket cap): RunConfig checks its range
        elif not isinstance(value, int):
            raise TraceError(f"config setting {name!r} should be a whole number, a word or true/false, "
                             f"got {type(value).__name__}.")
        elif not -2**63 <= value < 2**63:
            raise TraceError(f"config setting {name!r} must be an int64, got {shown(value)}.")
    return RunConfig.from_dict(values)


def _engine(data: dict[str, Any]) -> str:
    """The engine that recorded the file (DataParallel before version 3), whose vocabulary this dpviz knows."""
    if data["version"] < 3:
        return FIRST
    name = choice_of(data["engine"], "engine", tuple(ENGINES))
    vocabulary = vocabulary_of(name)
    for key, known in (("phases", vocabulary.names), ("memory_kinds", vocabulary.memory_names)):
        # A file written before a phase or kind was added names fewer: each of its names must be known.
        names = sequence(data[key], key, len(known))
        if not all(type(name) is str for name in names) or not set(names) <= set(known):
            raise TraceError(f"the file's {vocabulary.title} {key.replace('_', ' ')} are not the ones this dpviz "
                             f"knows ({', '.join(known)}); it was written by another version.")
    return name


def _build(data: dict[str, Any]) -> Trace:
    engine = _engine(data)
    vocabulary = vocabulary_of(engine)
    config = _config(data["config"])
    if config.engine != engine:
        raise TraceError(f"the file names engine {shown(engine)} but its config runs {shown(config.engine)}.")
    lanes = [
        Lane(whole(mapping(lane, "a lane")["id"], "lane id", 0, MAX_DEVICES - 1), text_of(lane["name"], "lane name", MAX_LANE_NAME))
        for lane in sequence(data["lanes"], "lanes", MAX_DEVICES)
    ]
    batches = [_batch(mapping(b, "a batch"), config) for b in sequence(data["batches"], "batches", config.num_batches)]
    return Trace(
        config=config,
        backend=choice_of(data["backend"], "backend", BACKEND_NAMES),
        torch_version=text_of(data["torch_version"], "torch_version", MAX_TORCH_VERSION),
        machine_gpus=whole(data["machine_gpus"], "machine_gpus", 0, MAX_MACHINE_GPUS),
        output_device=whole(data["output_device"], "output_device", 0, MAX_DEVICES - 1),
        lanes=lanes,
        batches=batches,
        spans=_spans(data, vocabulary.names, len(batches)),
        memory=_memory(data, vocabulary),
        memory_kind=choice_of(data["memory_kind"], "memory_kind", MEMORY_KINDS),
        **(_outcome(data) if data["version"] >= 2 else {}),
        engine=engine,
    )


def _batch(b: dict[str, Any], config: RunConfig) -> Batch:
    known: dict[tuple, list[int]] = {}
    return Batch(
        index=whole(b["index"], "batch index", 0, MAX_BATCHES - 1),
        sample_ids=wholes(b["sample_ids"], "batch sample_ids", 0, config.data_size - 1),
        input_shape=shape_of(b["input_shape"], "batch input_shape", known),
        output_shape=shape_of(b["output_shape"], "batch output_shape", known),
    )


def _outcome(data: dict[str, Any]) -> dict[str, Any]:
    """The fields schema version 2 added: arguments, failure, warnings and facts."""
    failure = data["failure"]
    if failure is not None:
        mapping(failure, "failure")
        failure = Failure(whole(failure["batch"], "failure batch", -2**63, 2**63 - 1),  # checked against the batches
                          text_of(failure["type"], "failure type", MAX_NAME),
                          text_of(failure["message"], "failure message"),
                          optional_whole(failure["replica"], "failure replica", 0, MAX_DEVICES - 1),
                          text_of(failure.get("cause", ""), "failure cause", MAX_TEXT))
    notes = [
        WarningNote(text_of(w["category"], "warning category", MAX_NAME), text_of(w["message"], "warning message"),
                    whole(w["batch"], "warning batch", 0, MAX_BATCHES - 1),
                    whole(w["count"], "warning count", 1, MAX_BATCHES * (MAX_DEVICES + 1)))
        for w in (mapping(w, "a warning") for w in sequence(data["warnings"], "warnings", MAX_WARNINGS))
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
            whole(batch, "argument batch", 0, MAX_BATCHES - 1), whole(replica, "argument replica", 0, MAX_DEVICES - 1),
            whole(lane, "argument lane", 0, MAX_DEVICES - 1), text_of(path, "argument path", MAX_ARGUMENT_TEXT),
            text_of(kind, "argument kind", MAX_ARGUMENT_TEXT),
            shape_of(shape, "argument shape", known),
            choice_of(mode, "argument mode", ARGUMENT_MODES),
        ))
    return arguments


def _facts(facts: Any) -> dict[str, Any]:
    """The engines' own findings, rebuilt from the checked values only: each engine reads the keys it declares."""
    mapping(facts, "facts")
    known = list(dict.fromkeys(key for spec in ENGINES.values() for key in spec.facts))  # each key once, in order
    unknown = sorted(str(key) for key in set(facts) - set(known))
    if unknown:
        listed = ", ".join(repr(key) for key in known[:-1]) + f" and {known[-1]!r}"
        raise TraceError(f"facts holds {shown(unknown[0])}; only {listed} are known.")
    out: dict[str, Any] = {}
    for spec in ENGINES.values():
        if any(key in facts for key in spec.facts):
            out.update(spec.part("facts")(facts))
    return out


def _rows(data: dict[str, Any], key: str, fields_key: str, fields: list[str], what: str, most: int) -> list[list]:
    """The rows stored under `key`, each a list of len(fields) values, the fields named under `fields_key`."""
    if typed(data[fields_key], list, fields_key) != fields:
        raise TraceError(f"{fields_key} should be {fields}, got {shown(data[fields_key])}.")
    rows = sequence(data[key], key, most)
    for raw in rows:
        typed(raw, list, what)
        if len(raw) != len(fields):
            raise TraceError(f"{what} has {len(raw):,} values; there should be {len(fields)}.")
    return rows


def _memory(data: dict[str, Any], vocabulary: Vocabulary) -> list[MemorySample]:
    """Memory after each phase of the first and the last batch, per device and kind of tensor."""
    phases, kinds = vocabulary.names, (*vocabulary.memory_names, vocabulary.measured_memory)
    most = 2 * len(phases) * MAX_DEVICES * len(kinds)
    return [
        MemorySample(whole(batch, "memory sample batch", 0, MAX_BATCHES - 1), choice_of(phase, "memory sample phase", phases),
                     whole(lane, "memory sample lane", 0, MAX_DEVICES - 1),
                     choice_of(category, "memory sample category", kinds),
                     whole(size, "memory sample bytes", 0, MAX_MEMORY_BYTES))
        for batch, phase, lane, category, size in _rows(data, "memory", "memory_fields", MEMORY_FIELDS, "a memory sample", most)
    ]


def _spans(data: dict[str, Any], phases: tuple[str, ...], batches: int) -> list[Span]:
    """The spans, each made of fresh objects (times, batch numbers, shapes) while the parsed rows are all
    alive: the spans then fill memory of their own, none of the rows' blocks stays pinned by a survivor,
    and letting the rows go at the end gives their memory back whole. A largest trace holds 35 MB less."""
    fields = typed(data["span_fields"], list, "span_fields")
    if fields not in (SPAN_FIELDS, SPAN_FIELDS_NAMING_BUCKET, SPAN_FIELDS_BEFORE_MICROBATCHES, SPAN_FIELDS_BEFORE_BUCKETS):
        raise TraceError(f"span_fields should be {SPAN_FIELDS}, got {shown(fields)}.")
    raw_spans = sequence(data["spans"], "spans")
    missing = [None] * (len(SPAN_FIELDS) - len(fields))
    if missing:
        for raw in raw_spans:
            if type(raw) is list:
                raw += missing
    threads = sequence(data["threads"], "threads", len(raw_spans))  # each thread ran a span
    for name in threads:
        text_of(name, "a thread name", MAX_THREAD_NAME)
    known: dict[tuple, list[int]] = {}
    names = {phase: phase for phase in phases}  # each span's phase is the vocabulary's own string
    indices = list(range(batches))  # one int per batch number, shared by the batch's spans
    spans = [_plain_span(raw, threads, known, names, indices) or _span(raw, threads, known, phases) for raw in raw_spans]
    raw_spans.clear()
    return spans


def _plain_span(raw: Any, threads: list[str], known: dict[tuple, list[int]], names: dict[str, str],
                indices: list[int]) -> Span | None:
    """The span, if every value is plainly in range and its shapes are ones already seen; else None and
    _span reads it again to say what is wrong. A 10,000-batch file has 200,000 spans: this is the fast way."""
    try:
        (phase, batch, start, end, lane, replica, row_offset, rows, input_shape, output_shape, thread, order, group,
         microbatch) = raw
        if not (type(raw) is list and type(phase) is str and phase in names and type(batch) is int
                and 0 <= batch < len(indices) and type(start) in (int, float) and type(end) in (int, float)
                and 0 <= start <= end <= MAX_SECONDS and type(row_offset) is int and 0 <= row_offset < 2**63
                and type(rows) is int and 0 <= rows < 2**63
                and (lane is None or type(lane) is int and 0 <= lane < MAX_DEVICES)
                and (replica is None or type(replica) is int and 0 <= replica < MAX_DEVICES)
                and (order is None or type(order) is int and 0 <= order < MAX_DEVICES)
                and (group is None or type(group) is int and 0 <= group < MAX_GROUPS)
                and (microbatch is None or type(microbatch) is int and 0 <= microbatch < MAX_MICROBATCHES)
                and (thread is None or type(thread) is int and 0 <= thread < len(threads))
                and (input_shape is None or type(input_shape) is list)
                and (output_shape is None or type(output_shape) is list)):
            return None
        shapes = (input_shape if input_shape is None else known.get(tuple(input_shape)),
                  output_shape if output_shape is None else known.get(tuple(output_shape)))
        if (shapes[0] is None) != (input_shape is None) or (shapes[1] is None) != (output_shape is None):
            return None
    except (TypeError, ValueError):  # not a list of fourteen, or a shape holding lists
        return None
    # start * 1.0: the same time in a fresh float (the parsed one sits among the rows).
    return Span(names[phase], indices[batch], start * 1.0, end * 1.0, lane, replica, row_offset, rows,
                shapes[0], shapes[1], None if thread is None else threads[thread], order, group, microbatch)


def _copy(value: Any) -> Any:
    return list(value) if type(value) is list else value


def _span(raw: Any, threads: list[str], known: dict[tuple, list[int]], phases: tuple[str, ...]) -> Span:
    if type(raw) is not list or len(raw) != len(SPAN_FIELDS):
        raise TraceError(f"a span should be a list of {len(SPAN_FIELDS)} values, got {shown(raw)}.")
    (phase, batch, start, end, lane, replica, row_offset, rows, input_shape, output_shape, thread, order, group,
     microbatch) = raw
    where = "a span"
    if not (type(start) in (int, float) and type(end) in (int, float) and 0 <= start <= end <= MAX_SECONDS):
        raise TraceError(f"a span's start and end must be times from 0 to {MAX_SECONDS:,} seconds (a week), start "
                         f"first; got {shown(start)} and {shown(end)}.")
    return Span(
        phase=choice_of(phase, f"{where}'s phase", phases),
        batch=whole(batch, f"{where}'s batch", 0, MAX_BATCHES - 1),
        start=start,
        end=end,
        lane=optional_whole(lane, f"{where}'s lane", 0, MAX_DEVICES - 1),
        replica=optional_whole(replica, f"{where}'s replica", 0, MAX_DEVICES - 1),
        # Checked against the span's batch: within int64 here, so that check's sentence stays short.
        row_offset=whole(row_offset, f"{where}'s row_offset", 0, 2**63 - 1),
        rows=whole(rows, f"{where}'s rows", 0, 2**63 - 1),
        # A shape seen first is kept for every span that has it: a copy, not the parsed row's own list.
        input_shape=None if input_shape is None else shape_of(_copy(input_shape), "a span's input_shape", known),
        output_shape=None if output_shape is None else shape_of(_copy(output_shape), "a span's output_shape", known),
        thread=None if thread is None else threads[whole(thread, "a span's thread", 0, len(threads) - 1)],
        order=optional_whole(order, f"{where}'s order", 0, MAX_DEVICES - 1),
        group=optional_whole(group, f"{where}'s group", 0, MAX_GROUPS - 1),
        microbatch=optional_whole(microbatch, f"{where}'s microbatch", 0, MAX_MICROBATCHES - 1),
    )
