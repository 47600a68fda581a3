"""The consistency of a loaded trace: every part fits the run its config describes.

    check(trace)     # TraceError (one sentence) unless the trace is what a run could have recorded

Generic rules read the trace's own vocabulary (which phases run on the host, on every lane, only in
training); the rules of the engine that recorded it (DataParallel's split) are its own check.
"""
from __future__ import annotations

from dpviz.trace.own_model import check_own
from dpviz.trace import Span, Trace
from dpviz.trace.values import (
    BACKEND_NAMES, MAX_ARGUMENT_PARTS, MAX_DEVICES, MAX_MACHINE_GPUS, MEMORY_KINDS, TraceError, shown,
)
from dpviz.trace.vocabulary import EVERY_LANE, HOST

# A module may warn once in each of its layers on every call (a user's transformer does): a bound, not a rule.
WARNINGS_PER_CALL = 64

def check(trace: Trace) -> None:
    """Raise TraceError unless the trace is internally consistent."""
    config = trace.config
    if trace.backend not in BACKEND_NAMES:
        raise TraceError(f"backend must be one of {', '.join(BACKEND_NAMES)}, got {shown(trace.backend)}.")
    if not 0 <= trace.machine_gpus <= MAX_MACHINE_GPUS:
        raise TraceError(f"machine_gpus must be between 0 and {MAX_MACHINE_GPUS:,}, got {shown(trace.machine_gpus)}.")
    if trace.memory_kind not in MEMORY_KINDS:
        raise TraceError(f"memory_kind must be one of {', '.join(MEMORY_KINDS)}, got {shown(trace.memory_kind)}.")
    if (trace.memory_kind == "measured") != (trace.backend == "cuda"):
        raise TraceError(f"memory is {trace.memory_kind} but the backend is {trace.backend}; only real GPUs measure it.")
    lane_ids = [lane.id for lane in trace.lanes]
    if lane_ids != list(range(config.gpus)):
        raise TraceError(f"the trace has lanes {shown(lane_ids) if len(lane_ids) > MAX_DEVICES else lane_ids} "
                         f"but its config asks for {config.gpus} devices.")
    if trace.output_device not in lane_ids:
        raise TraceError(f"output device {shown(trace.output_device)} is not one of the lanes {lane_ids}.")
    _check_batches(trace)
    _check_spans(trace, lane_ids)
    _check_memory(trace, lane_ids)
    try:  # the rules of the engine that recorded it: its check module alone, which imports no torch
        trace.spec.part("check")(trace)
    except TraceError:
        raise
    except ValueError as error:
        raise TraceError(str(error)) from None
    _check_outcome(trace, lane_ids)


def _check_batches(trace: Trace) -> None:
    """The batches follow from the config: their number, sizes, shapes and dataset rows."""
    config, failure = trace.config, trace.failure
    if failure is None and len(trace.batches) != config.num_batches:
        raise TraceError(f"the trace has {len(trace.batches):,} batches but its config makes {config.num_batches:,}.")
    if failure is not None and not 0 <= failure.batch == len(trace.batches) - 1 < config.num_batches:
        raise TraceError(f"the run failed in batch {failure.batch:,}, which should be the trace's last of at most "
                         f"{config.num_batches:,} batches, but the trace has {len(trace.batches):,}.")
    for position, batch in enumerate(trace.batches):  # every engine's: the views look a batch's spans up by its number
        if batch.index != position:
            raise TraceError(f"batch {position:,} is numbered {batch.index:,}.")
    if not trace.vocabulary.rows_once:
        return  # its engine's check knows how its batches repeat rows (DistributedSampler's padding)
    expected_rows = [config.batch_size] * (config.num_batches - 1) + [config.data_size - config.batch_size * (config.num_batches - 1)]
    if [b.rows for b in trace.batches] != expected_rows[:len(trace.batches)]:
        raise TraceError(f"the batches' sizes do not follow from data_size {config.data_size:,} and batch_size {config.batch_size:,}.")
    seen = bytearray(config.data_size)
    for position, batch in enumerate(trace.batches):
        if len(batch.input_shape) <= config.dim or batch.input_shape[config.dim] != batch.rows:
            raise TraceError(f"batch {position:,} holds {batch.rows:,} rows but its input shape is {batch.input_shape}.")
        for sample in batch.sample_ids:  # in range: checked when read
            if seen[sample]:
                raise TraceError(f"batch {position:,} holds row {sample:,}, which an earlier batch holds too.")
            seen[sample] = 1


def _phase_rules(trace: Trace) -> dict[str, tuple[bool, bool, bool]]:
    """Per phase of the trace's vocabulary: (runs on the host, runs once per replica, part of training)."""
    return {p.name: (p.where == HOST, p.where == EVERY_LANE, p.training) for p in trace.vocabulary.phases}


def _check_spans(trace: Trace, lane_ids: list[int]) -> None:
    """Each span fits its batch, and each phase of a batch (each replica's, for forward and backward) is
    timed once: what DataParallel's one call per batch makes."""
    seen: set[tuple] = set()
    rows = [b.rows for b in trace.batches]
    lanes, train = len(lane_ids), trace.config.train
    rules = _phase_rules(trace)
    vocabulary = trace.vocabulary
    group_noun = vocabulary.group_noun or "group"  # the engine's word: DDP's bucket, FSDP's sharded module
    for span in trace.spans:
        host, per_replica, training = rules[span.phase]
        lane = span.lane
        fits = (span.batch < len(rows) and (lane is None) == host and (lane is None or lane < lanes)
                and (train or not training) and span.row_offset + span.rows <= rows[span.batch]
                and (span.replica == lane if per_replica else _plain(span))
                and (span.phase != "backward" or _gradient(span)))
        if not fits:
            _check_span(trace, span, lane_ids)  # says which rule it breaks
        if (span.group is not None) != vocabulary.phase(span.phase).grouped:
            raise TraceError(f"a {span.phase!r} span of batch {span.batch:,} "
                             f"{'names a' if span.group is not None else 'names no'} {group_noun}; only "
                             f"{' and '.join(vocabulary.names_where_grouped) or 'no'} spans name one.")
        if (span.microbatch is not None) != vocabulary.phase(span.phase).per_microbatch:
            raise TraceError(f"a {span.phase!r} span of batch {span.batch:,} names no microbatch; each {span.phase} span "
                             "names the microbatch it was of." if span.microbatch is None else
                             f"a {span.phase!r} span of batch {span.batch:,} names a microbatch; only "
                             f"{' and '.join(vocabulary.names_per_microbatch) or 'no'} spans name one.")
        key = (span.batch, span.phase, span.replica, span.group, span.microbatch)
        if key in seen:
            who = f" of replica {span.replica}" if span.replica is not None else ""
            who += f" for {group_noun} {span.group}" if span.group is not None else ""
            who += f" for microbatch {span.microbatch}" if span.microbatch is not None else ""
            raise TraceError(f"batch {span.batch:,} has two {span.phase} spans{who}; a run times each once.")
        seen.add(key)


def _plain(span: Span) -> bool:
    """A span of a phase that runs once per batch holds its times, batch and lane only."""
    return (span.replica is None and span.order is None and span.input_shape is None and span.output_shape is None
            and span.thread is None and span.rows == 0 and span.row_offset == 0 and span.group is None)


def _gradient(span: Span) -> bool:
    """A replica's backward holds the shape of the output gradient it received, and no output or order."""
    return span.input_shape is not None and span.output_shape is None and span.order is None


def _check_span(trace: Trace, span: Span, lane_ids: list[int]) -> None:
    where = f"a {span.phase!r} span of batch {span.batch:,}"
    vocabulary = trace.vocabulary
    replica_phases, host_phases = vocabulary.where(EVERY_LANE), vocabulary.where(HOST)
    if not 0 <= span.batch < len(trace.batches):
        raise TraceError(f"{where} refers to a batch that is not in the trace.")
    if span.lane is not None and span.lane not in lane_ids:
        raise TraceError(f"{where} runs on lane {span.lane}, which is not one of {lane_ids}.")
    if span.phase in replica_phases and (span.lane is None or span.replica != span.lane):
        raise TraceError(f"{where} should name its replica and run on that replica's lane.")
    if span.phase not in replica_phases and not _plain(span):
        raise TraceError(f"{where} names a replica, rows, shapes, a thread or an order; only "
                         f"{' and '.join(replica_phases)} spans do.")
    if span.phase == "backward" and not _gradient(span):
        raise TraceError(f"{where} should hold its output gradient's shape as input_shape, and no output_shape "
                         "or order.")
    if (span.phase in host_phases) != (span.lane is None):
        raise TraceError(f"{where} {'runs on a lane' if span.lane is not None else 'names no lane'}; "
                         f"only {', '.join(host_phases)} run on the host.")
    if vocabulary.phase(span.phase).training and not trace.config.train:
        raise TraceError(f"{where} is part of training, but the trace's config does not train.")
    if span.row_offset + span.rows > trace.batches[span.batch].rows:
        raise TraceError(f"{where} claims rows {span.row_offset:,}..{span.row_offset + span.rows:,} of a "
                         f"{trace.batches[span.batch].rows:,}-row batch, past the end.")


def _check_memory(trace: Trace, lane_ids: list[int]) -> None:
    """Memory is sampled once per kind of tensor after each phase of the first and the last batch."""
    vocabulary = trace.vocabulary
    categories = (vocabulary.measured_memory,) if trace.memory_kind == "measured" else vocabulary.memory_names
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
        if not (0 <= w.batch < count and 1 <= w.count <= count * (len(lane_ids) + 1) * WARNINGS_PER_CALL):
            raise TraceError(f"a warning names batch {w.batch:,} ({w.count:,} times), which does not fit the trace: "
                             f"at most {WARNINGS_PER_CALL} times per replica and call in each of its {count:,} batches.")
    _check_facts(trace)


def _check_facts(trace: Trace) -> None:
    """A counter's state counts at most every batch and row; losses are of sampled batches and their chunks."""
    state = trace.facts.get("state", {})
    config = trace.config
    check_own(config.model, trace.facts)
    for name, most in (("calls", config.num_batches), ("rows_seen", config.data_size)):
        if name in state and max(state[name]) > most:
            raise TraceError(f"facts state {name!r} must be between 0 and {most:,}, got {max(state[name]):,}.")
    for loss in trace.facts.get("losses", []):
        batch = loss["batch"]
        if batch >= len(trace.batches) or sum(loss["chunk_rows"]) > trace.batches[batch].rows \
                or len(loss["chunk_rows"]) > config.gpus:
            raise TraceError(f"a loss sample of batch {batch:,} with chunks {shown(loss['chunk_rows'])} does not fit "
                             f"the trace's {len(trace.batches):,} batches on {config.gpus} devices.")
