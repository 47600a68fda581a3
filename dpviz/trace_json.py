"""Traces to and from JSON. Loading checks everything: a file may come from anyone.

`loads` rejects malformed JSON, unknown schema versions and inconsistent content with a TraceError
whose message is one sentence naming what is wrong. Nothing is ever unpickled or executed.
"""
from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from .config import ConfigError, RunConfig
from .engines.dp.memory import CATEGORIES, MEASURED
from .trace import PHASES, SCHEMA_VERSION, ArgumentSample, Batch, Failure, Lane, MemorySample, Span, Trace, WarningNote
from .engines.dp.check import replica_rows

MAX_TRACE_BYTES = 64 * 1024 * 1024
BACKEND_NAMES = ("cuda", "simulated")


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
MAX_TEXT = 20_000  # characters of an error message or warning kept from a file


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
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as error:  # JSONDecodeError, bad UTF-8, huge numbers, deep nesting
        raise TraceError(f"the file is not valid JSON ({str(error)[:120]}).") from None
    return from_dict(data)


def from_dict(data: Any) -> Trace:
    if not isinstance(data, dict) or data.get("format") != "dpviz-trace":
        raise TraceError("the file is JSON but not a dpviz trace (no \"format\": \"dpviz-trace\").")
    version = data.get("version")
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        raise TraceError(f"trace version {version!r} is not supported; this dpviz reads versions "
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
    return f"field {error.args[0]!r}" if isinstance(error, KeyError) else str(error)


def _typed(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        name = " or ".join(k.__name__ for k in kind) if isinstance(kind, tuple) else kind.__name__
        raise TraceError(f"{where} should be {name}, got {type(value).__name__}.")
    return value


def _ints(value: Any, where: str) -> list[int]:
    _typed(value, list, where)
    for item in value:
        _typed(item, int, where + " item")
    return value


def _build(data: dict[str, Any]) -> Trace:
    config = RunConfig.from_dict(_typed(data["config"], dict, "config"))
    lanes = [Lane(_typed(l["id"], int, "lane id"), _typed(l["name"], str, "lane name")) for l in _typed(data["lanes"], list, "lanes")]
    batches = [
        Batch(
            index=_typed(b["index"], int, "batch index"),
            sample_ids=_ints(b["sample_ids"], "batch sample_ids"),
            input_shape=_ints(b["input_shape"], "batch input_shape"),
            output_shape=_ints(b["output_shape"], "batch output_shape"),
        )
        for b in _typed(data["batches"], list, "batches")
    ]
    spans = _spans(data)
    return Trace(
        config=config,
        backend=_typed(data["backend"], str, "backend"),
        torch_version=_typed(data["torch_version"], str, "torch_version"),
        machine_gpus=_typed(data["machine_gpus"], int, "machine_gpus"),
        output_device=_typed(data["output_device"], int, "output_device"),
        lanes=lanes,
        batches=batches,
        spans=spans,
        memory=_memory(data),
        memory_kind=_typed(data["memory_kind"], str, "memory_kind"),
        **(_outcome(data) if data["version"] >= 2 else {}),
    )


def _text(value: Any, where: str) -> str:
    _typed(value, str, where)
    if len(value) > MAX_TEXT:
        raise TraceError(f"{where} is {len(value):,} characters long; at most {MAX_TEXT:,} are allowed.")
    return value


def _number(value: Any, where: str) -> float:
    _typed(value, (int, float), where)
    if not math.isfinite(value):
        raise TraceError(f"{where} is not a finite number.")
    return value


def _outcome(data: dict[str, Any]) -> dict[str, Any]:
    """The fields schema version 2 added: arguments, failure, warnings and facts."""
    arguments = []
    for batch, replica, lane, path, kind, shape, mode in _rows(data, "arguments", "argument_fields", ARGUMENT_FIELDS, "an argument"):
        for value, typ, name in ((batch, int, "batch"), (replica, int, "replica"), (lane, int, "lane")):
            _typed(value, typ, f"argument {name}")
        if mode not in ARGUMENT_MODES:
            raise TraceError(f"an argument's mode must be one of {', '.join(ARGUMENT_MODES)}, got {mode!r}.")
        arguments.append(ArgumentSample(batch, replica, lane, _text(path, "argument path"), _text(kind, "argument kind"),
                                        _ints(shape, "argument shape"), mode))
    failure = data["failure"]
    if failure is not None:
        _typed(failure, dict, "failure")
        replica = failure["replica"]
        failure = Failure(_typed(failure["batch"], int, "failure batch"), _text(failure["type"], "failure type"),
                          _text(failure["message"], "failure message"),
                          None if replica is None else _typed(replica, int, "failure replica"))
    notes = [
        WarningNote(_text(w["category"], "warning category"), _text(w["message"], "warning message"),
                    _typed(w["batch"], int, "warning batch"), _typed(w["count"], int, "warning count"))
        for w in (_typed(w, dict, "warning") for w in _typed(data["warnings"], list, "warnings"))
    ]
    return {"arguments": arguments, "failure": failure, "warnings": notes, "facts": _facts(data["facts"])}


def _facts(facts: Any) -> dict[str, Any]:
    _typed(facts, dict, "facts")
    unknown = sorted(set(facts) - {"state", "losses"})
    if unknown:
        raise TraceError(f"facts holds {unknown[0]!r}; only 'state' and 'losses' are known.")
    state = _typed(facts.get("state", {}), dict, "facts state")
    if state and sorted(state) != ["calls", "rows_seen"]:
        raise TraceError(f"facts state should hold 'calls' and 'rows_seen', got {sorted(state)}.")
    for name, pair in state.items():
        if len(_ints(pair, f"facts state {name!r}")) != 2:
            raise TraceError(f"facts state {name!r} should be [after the run, one device], got {pair}.")
    for loss in _typed(facts.get("losses", []), list, "facts losses"):
        _typed(loss, dict, "a loss sample")
        _typed(loss["batch"], int, "loss batch")
        gathered = _typed(loss["gathered"], list, "gathered losses")
        for value in gathered:
            _number(value, "a gathered loss")
        if not gathered or len(_ints(loss["chunk_rows"], "loss chunk_rows")) != len(gathered):
            raise TraceError("a loss sample needs one gathered loss per chunk, and at least one.")
        _number(loss["whole"], "the whole-batch loss")
    return facts


def _rows(data: dict[str, Any], key: str, fields_key: str, fields: list[str], what: str) -> list[list]:
    """The rows stored under `key`, each a list of len(fields) values, the fields named under `fields_key`."""
    if _typed(data[fields_key], list, fields_key) != fields:
        raise TraceError(f"{fields_key} should be {fields}, got {data[fields_key]}.")
    rows = _typed(data[key], list, key)
    for raw in rows:
        _typed(raw, list, what)
        if len(raw) != len(fields):
            raise TraceError(f"{what} has {len(raw)} values; there should be {len(fields)}.")
    return rows


def _memory(data: dict[str, Any]) -> list[MemorySample]:
    samples = []
    for batch, phase, lane, category, size in _rows(data, "memory", "memory_fields", MEMORY_FIELDS, "a memory sample"):
        for value, kind, name in ((batch, int, "batch"), (phase, str, "phase"), (lane, int, "lane"),
                                  (category, str, "category"), (size, int, "bytes")):
            _typed(value, kind, f"memory sample {name}")
        samples.append(MemorySample(batch, phase, lane, category, size))
    return samples


_SPAN_TYPES = {
    "phase": str, "batch": int, "start": (int, float), "end": (int, float), "lane": int, "replica": int,
    "row_offset": int, "rows": int, "input_shape": list, "output_shape": list, "thread": int, "order": int,
}
_OPTIONAL = {"lane", "replica", "input_shape", "output_shape", "thread", "order"}


def _spans(data: dict[str, Any]) -> list[Span]:
    fields = _typed(data["span_fields"], list, "span_fields")
    if fields != SPAN_FIELDS:
        raise TraceError(f"span_fields should be {SPAN_FIELDS}, got {fields}.")
    threads = _typed(data["threads"], list, "threads")
    for name in threads:
        _typed(name, str, "thread name")
    return [_span(raw, threads) for raw in _typed(data["spans"], list, "spans")]


def _span(raw: Any, threads: list[str]) -> Span:
    _typed(raw, list, "span")
    if len(raw) != len(SPAN_FIELDS):
        raise TraceError(f"a span has {len(raw)} values; spans have {len(SPAN_FIELDS)}.")
    values = dict(zip(SPAN_FIELDS, raw))
    for key, kind in _SPAN_TYPES.items():
        value = values[key]
        if value is None and key in _OPTIONAL:
            continue
        if isinstance(value, bool) or not isinstance(value, kind):
            raise TraceError(f"span field {key!r} has the wrong type ({type(value).__name__}).")
    for key in ("input_shape", "output_shape"):
        if values[key] is not None:
            _ints(values[key], f"span {key}")
    if not (math.isfinite(values["start"]) and math.isfinite(values["end"]) and values["start"] >= 0):
        raise TraceError("a span has a start or end time that is negative or not a finite number.")
    if values["thread"] is not None:
        if not 0 <= values["thread"] < len(threads):
            raise TraceError(f"a span names thread {values['thread']}, which is not in the thread list.")
        values["thread"] = threads[values["thread"]]
    return Span(**values)


def check(trace: Trace) -> None:
    """Raise TraceError unless the trace is internally consistent."""
    config = trace.config
    if trace.backend not in BACKEND_NAMES:
        raise TraceError(f"backend must be one of {', '.join(BACKEND_NAMES)}, got {trace.backend!r}.")
    if trace.machine_gpus < 0:
        raise TraceError(f"machine_gpus must be 0 or more, got {trace.machine_gpus}.")
    if (trace.memory_kind == "measured") != (trace.backend == "cuda"):
        raise TraceError(f"memory is {trace.memory_kind} but the backend is {trace.backend}; only real GPUs measure it.")
    lane_ids = [lane.id for lane in trace.lanes]
    if lane_ids != list(range(config.gpus)):
        raise TraceError(f"the trace has lanes {lane_ids} but its config asks for {config.gpus} devices.")
    if trace.output_device not in lane_ids:
        raise TraceError(f"output device {trace.output_device} is not one of the lanes {lane_ids}.")
    failure = trace.failure
    if failure is None and len(trace.batches) != config.num_batches:
        raise TraceError(f"the trace has {len(trace.batches)} batches but its config makes {config.num_batches}.")
    if failure is not None and not 0 <= failure.batch == len(trace.batches) - 1 < config.num_batches:
        raise TraceError(f"the run failed in batch {failure.batch}, which should be the trace's last of at most "
                         f"{config.num_batches} batches, but the trace has {len(trace.batches)}.")
    expected_rows = [config.batch_size] * (config.num_batches - 1) + [config.data_size - config.batch_size * (config.num_batches - 1)]
    if [b.rows for b in trace.batches] != expected_rows[:len(trace.batches)]:
        raise TraceError(f"the batches' sizes do not follow from data_size {config.data_size:,} and batch_size {config.batch_size:,}.")
    seen = bytearray(config.data_size)
    for position, batch in enumerate(trace.batches):
        if batch.index != position:
            raise TraceError(f"batch {position} is numbered {batch.index}.")
        if len(batch.input_shape) <= config.dim or batch.input_shape[config.dim] != batch.rows:
            raise TraceError(f"batch {position} holds {batch.rows} rows but its input shape is {batch.input_shape}.")
        for sample in batch.sample_ids:
            if not 0 <= sample < config.data_size or seen[sample]:
                raise TraceError(f"batch {position} holds row {sample}, outside the data or already in an earlier batch.")
            seen[sample] = 1
    for span in trace.spans:
        _check_span(trace, span, lane_ids)
    _check_memory(trace, lane_ids)
    for batch in trace.batches:
        # A failing batch stops part-way: its split is not checked, only that its replicas fit the batch.
        _check_replicas(trace, batch, split=failure is None or batch.index != failure.batch)
    for a in trace.arguments:
        if not (0 <= a.batch < len(trace.batches) and a.lane in lane_ids and a.replica == a.lane):
            raise TraceError(f"an argument of replica {a.replica} on lane {a.lane} in batch {a.batch} does not fit the trace.")
    for w in trace.warnings:
        if not (0 <= w.batch < len(trace.batches) and w.count >= 1):
            raise TraceError(f"a warning names batch {w.batch} ({w.count} times), which does not fit the trace.")


def _check_span(trace: Trace, span: Span, lane_ids: list[int]) -> None:
    where = f"a {span.phase!r} span of batch {span.batch}"
    if span.phase not in PHASES:
        raise TraceError(f"{where} has an unknown phase; phases are {', '.join(PHASES)}.")
    if not 0 <= span.batch < len(trace.batches):
        raise TraceError(f"{where} refers to a batch that is not in the trace.")
    if not span.start <= span.end:
        raise TraceError(f"{where} ends before it starts.")
    if span.lane is not None and span.lane not in lane_ids:
        raise TraceError(f"{where} runs on lane {span.lane}, which is not one of {lane_ids}.")
    if span.phase in ("forward", "backward") and (span.lane is None or span.replica is None):
        raise TraceError(f"{where} names no lane or replica.")


def _check_memory(trace: Trace, lane_ids: list[int]) -> None:
    if trace.memory_kind not in MEMORY_KINDS:
        raise TraceError(f"memory_kind must be one of {', '.join(MEMORY_KINDS)}, got {trace.memory_kind!r}.")
    categories = (MEASURED,) if trace.memory_kind == "measured" else CATEGORIES
    for m in trace.memory:
        if not (0 <= m.batch < len(trace.batches) and m.phase in PHASES and m.lane in lane_ids
                and m.category in categories and m.bytes >= 0):
            raise TraceError(
                f"a memory sample ({m.bytes} bytes of {m.category!r} on lane {m.lane} after {m.phase!r} "
                f"of batch {m.batch}) does not fit the trace."
            )


def _check_replicas(trace: Trace, batch: Batch, split: bool = True) -> None:
    replicas = trace.replicas(batch.index)
    if not split:
        if [(s.replica, s.lane) for s in replicas] != [(i, i) for i in range(len(replicas))] \
                or len(replicas) > trace.config.gpus:
            raise TraceError(f"batch {batch.index}'s replicas are not one per device in device order.")
    expected = replica_rows(trace.config, batch.rows) if split else [s.rows for s in replicas]
    if [(s.replica, s.lane, s.rows) for s in replicas] != [(i, i, n) for i, n in enumerate(expected)]:
        raise TraceError(
            f"batch {batch.index}'s replicas got {[s.rows for s in replicas]} rows, but DataParallel splits "
            f"{batch.rows} rows over {trace.config.gpus} devices as {expected}."
        )
    end = 0
    for span in trace.replicas(batch.index):
        if span.rows < 0 or span.row_offset < end or span.row_offset + span.rows > batch.rows:
            raise TraceError(
                f"replica {span.replica} of batch {batch.index} claims rows {span.row_offset}..{span.row_offset + span.rows} "
                f"of a {batch.rows}-row batch, overlapping another replica or past the end."
            )
        end = span.row_offset + span.rows
