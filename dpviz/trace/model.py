"""Trace: what one run did, as plain data. The contract between the recorder and every view.

A trace is lanes (devices now; DDP ranks later) crossed with timed spans (a phase of one batch on one
lane, or on the host when lane is None), plus per-batch facts. New phases (backward, reduce, step) and
new per-lane measurements are new span phases or new fields, not a new shape.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from dpviz.config import RunConfig
from dpviz.engines import ENGINES, EngineSpec, vocabulary as vocabulary_of
from dpviz.trace.rows import Rows
from dpviz.trace.slot_init import with_slot_init
from dpviz.trace.vocabulary import Vocabulary

SCHEMA_VERSION = 3  # 2 added the model, input form, arguments, failure, warnings and facts; 3 the engine


@dataclass(frozen=True)
class Lane:
    """A device DataParallel could use: its index in device_ids order and a human name."""

    id: int
    name: str


@dataclass(frozen=True)
class Batch:
    """One batch from the DataLoader: the dataset rows it holds, in order, and what went in and out."""

    index: int
    sample_ids: Rows  # any sequence of ints given is kept as Rows: 4 bytes a row, read as a list is
    input_shape: list[int]
    output_shape: list[int]

    def __post_init__(self) -> None:
        if not isinstance(self.sample_ids, Rows):
            object.__setattr__(self, "sample_ids", Rows(self.sample_ids))

    @property
    def rows(self) -> int:
        return len(self.sample_ids)


@with_slot_init  # built hundreds of thousands of times: each field written straight into its slot
@dataclass(frozen=True, slots=True)  # a run can hold 400,000 spans: no per-object __dict__
class Span:
    """A timed piece of work. Times are seconds since the run began.

    Forward spans are replicas: `replica` is the index in the scattered inputs, `row_offset` and `rows`
    the slice of the batch it received, `order` when it finished among its batch's replicas (0 first)
    and `thread` the name of the thread that ran it. A replica's backward span has the same replica,
    and `rows` and `input_shape` of the output gradient it received from the gather's backward.
    Under DDP a lane is a rank, `replica` the rank, and a forward's rows are that rank's own.
    """

    phase: str
    batch: int
    start: float
    end: float
    lane: int | None = None
    replica: int | None = None
    row_offset: int = 0
    rows: int = 0
    input_shape: list[int] | None = None
    output_shape: list[int] | None = None
    thread: str | None = None
    order: int | None = None
    # The group a grouped phase's span is of; the engine's vocabulary names what a group is (Vocabulary.group_noun):
    # DDP's and ZeRO-1's gradient bucket (facts["ddp"]["buckets"] says what it holds), FSDP's sharded module.
    group: int | None = None
    microbatch: int | None = None  # a pipeline's stage: the microbatch this forward, backward or transfer was of

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class MemorySample:
    """Bytes one category of tensors takes on one lane after one phase of one batch."""

    batch: int
    phase: str
    lane: int
    category: str
    bytes: int


@dataclass(frozen=True, slots=True)
class ArgumentSample:
    """One argument (or part of one) as one replica of one batch received it from scatter.

    `mode`: "split" (a tensor's chunk), "shared" (the caller's own object, by reference) or
    "copied" (a container of non-tensors rebuilt whole for every replica)."""

    batch: int
    replica: int
    lane: int
    path: str
    kind: str
    shape: list[int]
    mode: str


@dataclass(frozen=True)
class Failure:
    """What the run raised, as the user sees it: the exception's type and its whole message (DataParallel's
    "Caught TypeError in replica 5 on device 5.\nOriginal Traceback ...", or a rank's own error after "rank 0: "),
    and torch's own cause where the message is dpviz's or holds more than the error: a rank's exception as Python's
    last traceback line prints it ("RuntimeError: Expected to have finished reduction ...")."""

    batch: int
    type: str
    message: str
    replica: int | None = None  # the replica named in the message, when a replica failed
    cause: str = ""  # torch's own last line, kept where the message cannot give it back (files before it: "")

    @property
    def headline(self) -> str:
        """The first line, as Python's last traceback line prints it."""
        return f"{self.type}: {self.message.splitlines()[0] if self.message else ''}"

    @property
    def printed(self) -> str:
        """The whole error as Python prints its last lines: type and message, and the kept cause under them where the
        message is dpviz's sentence and does not quote it (a rank's timeout)."""
        said = self.cause.split(": ", 1)[-1]
        return f"{self.type}: {self.message}" + (f"\n{self.cause}" if self.cause and said not in self.message else "")

    @property
    def original(self) -> str:
        """torch's own cause: the kept cause, else the original exception's line at the foot of the traceback a
        replica's message holds (the first line after its last frame), else the headline."""
        if self.cause:
            return self.cause
        lines = [line for line in self.message.splitlines() if line.strip()]
        frames = [i for i, line in enumerate(lines) if line.startswith("  File ")]
        if not frames:
            return lines[-1] if len(lines) > 1 else self.headline
        # A frame's source line and ^^^ markers are indented; the exception's own text starts at the margin.
        after = [line for line in lines[frames[-1] + 1:] if not line.startswith(" ")]
        return after[0] if after else lines[-1]


@dataclass(frozen=True)
class WarningNote:
    """A warning raised during the run: its category and text, the first batch and how many times."""

    category: str
    message: str
    batch: int
    count: int


@dataclass(frozen=True)
class Trace:
    """A recorded run: its settings, which backend ran it, its lanes, batches and spans."""

    config: RunConfig
    backend: str  # "cuda" (real nn.DataParallel) or "simulated" (SimulatedDataParallel)
    torch_version: str
    machine_gpus: int  # CUDA devices the recording machine had
    output_device: int
    lanes: list[Lane]
    batches: list[Batch]
    spans: list[Span] = field(default_factory=list)
    # Memory after each phase for the first and the last batch (the last may split differently):
    # "measured" on real GPUs, "computed" from tensor sizes on simulated devices.
    memory: list[MemorySample] = field(default_factory=list)
    memory_kind: str = "computed"
    # What each replica received of each argument, for the first, the last and a failing batch.
    arguments: list[ArgumentSample] = field(default_factory=list)
    failure: Failure | None = None  # the run stopped at failure.batch, the last batch in the trace
    warnings: list[WarningNote] = field(default_factory=list)
    # Model-specific findings, plain JSON values: "state" (counter: {name: [after the run, a plain
    # model's]}), "losses" (loss: per sampled batch, the gathered vector, chunk rows, whole-batch loss).
    facts: dict[str, Any] = field(default_factory=dict)
    version: int = SCHEMA_VERSION
    engine: str = "dp"  # what recorded it (dpviz.engines): its vocabulary names the phases and memory kinds

    @property
    def vocabulary(self) -> Vocabulary:
        """The recording engine's words: phases, memory kinds, lane names. Every reader takes them from here."""
        return vocabulary_of(self.engine)

    @property
    def spec(self) -> EngineSpec:
        """What the recording engine declares: its labels, its unit of work and the parts that read its traces."""
        return ENGINES[self.engine]

    @property
    def simulated(self) -> bool:
        return self.backend == "simulated"

    @property
    def dim(self) -> int:
        """The dim DataParallel split the batch on (1 for a time-first GRU)."""
        return self.config.dim

    @cached_property
    def _spans_by_batch(self) -> dict[int, list[Span]]:
        by_batch: dict[int, list[Span]] = {b.index: [] for b in self.batches}
        for span in self.spans:
            by_batch[span.batch].append(span)
        return by_batch

    def spans_of(self, batch: int, phase: str | None = None) -> list[Span]:
        """The spans of one batch (of one phase), in the order they were recorded."""
        spans = self._spans_by_batch[batch]
        return spans if phase is None else [s for s in spans if s.phase == phase]

    def replicas(self, batch: int) -> list[Span]:
        """The forward spans of one batch, in replica (device_ids) order."""
        forwards = [s for s in self._spans_by_batch[batch] if s.phase == "forward"]
        return sorted(forwards, key=lambda s: -1 if s.replica is None else s.replica)

    def host_spans(self, batch: int) -> dict[str, Span]:
        """The host phases of one batch by name, in the order they ran (absent ones are missing)."""
        return {s.phase: s for s in self._spans_by_batch[batch] if s.lane is None}

    def sample_ids(self, span: Span) -> list[int]:
        """The dataset rows a span handled."""
        return self.batches[span.batch].sample_ids[span.row_offset : span.row_offset + span.rows]

    @property
    def duration(self) -> float:
        return max((s.end for s in self.spans), default=0.0)
