"""An engine's words for what it does: its lanes, its phases and its kinds of memory, declared once.

    vocabulary = trace.vocabulary
    vocabulary.phase("gather").hover     # 'gather: output copied back to the output device'
    vocabulary.lane_name(3)              # 'GPU 3' (DataParallel) or 'rank 3' (DistributedDataParallel)
    vocabulary.order                     # {'scatter': 0, 'replicate': 1, ...}: pipeline order

Every trace carries the vocabulary of the engine that recorded it, and the views, tables, key figures,
exports and the loader read phase names, order, places, labels and colours from there: a new phase is
one entry in its engine's vocabulary. (DataParallel's explanations still name its phases in words.) Plain data with no torch, so drawing a trace
needs nothing of the recording side.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from dpviz.trace.legend import KINDS

HOST = "host"  # runs on the calling thread, outside any lane (span.lane is None)
EVERY_LANE = "every lane"  # one span per lane that took part (a replica's forward)
ONE_LANE = "one lane"  # one span per batch on a single lane (the loss on the output device)


@dataclass(frozen=True)
class Phase:
    """A kind of span: where it runs, what the legend and the hovers call it, how it is drawn."""

    name: str
    where: str  # HOST, EVERY_LANE or ONE_LANE
    label: str  # the legend's short name
    hover: str  # the longer words of hovers and tables
    color: str = "lane"  # "lane": the lane's own colour; otherwise a colour of its own ("#667755"), 3:1 on both themes
    hatch: str = ""  # the pattern of its bars, when the lane's colour alone would not tell it apart
    place: str = "host"  # where it runs, in words, for the key-figures table
    drawn: bool = True  # False for an envelope whose inside is drawn instead (DataParallel's apply)
    training: bool = False  # only in a training run
    grouped: bool = False  # one span per group (DDP's bucket all-reduce, FSDP's module gather), each naming its group
    per_microbatch: bool = False  # one span per microbatch (a pipeline stage's forward), each naming its microbatch
    # What it moves between devices, as one of the legend's kinds (dpviz.trace.legend): it then takes the kind's
    # colour, the same in every engine. Empty for work on a device (forward, backward, a step).
    kind: str = ""

    def __post_init__(self) -> None:
        if self.kind:
            if self.kind not in KINDS:
                raise ValueError(f"phase {self.name!r} moves {self.kind!r}; the legend's kinds are {', '.join(KINDS)}")
            if self.color not in ("lane", KINDS[self.kind].color):
                raise ValueError(f"phase {self.name!r} is a {self.kind}, which is drawn in the legend's colour, not {self.color}")
            object.__setattr__(self, "color", KINDS[self.kind].color)


@dataclass(frozen=True)
class MemoryKind:
    """A kind of tensor in the memory ledger, with its colour and what it means."""

    name: str
    color: str
    transient: bool = False  # freed when the batch ends (its graph, chunks and buffers)
    more: str = ""  # why the first lane holds more of it, when it does
    # What it is beside other engines' kinds (dpviz.analysis.memory_compare.FAMILIES: parameters, gradients,
    # optimizer state, activations, communication buffers); empty: its own name is one of them.
    family: str = ""

    @property
    def compared_as(self) -> str:
        return self.family or self.name


@dataclass(frozen=True)
class Vocabulary:
    """Everything an engine's traces are drawn and explained with."""

    engine: str  # "dp"
    title: str  # "DataParallel"
    lane_noun: str  # "GPU": what one lane is called ("GPU 3")
    phases: tuple[Phase, ...]  # in pipeline order: a host phase before the lane phase it launches
    memory_kinds: tuple[MemoryKind, ...]  # bottom to top in a stacked bar
    measured_memory: str = "allocated"  # the one kind of a real device's own figure
    rows_once: bool = True  # every dataset row is in one batch at most (DDP's sampler repeats rows to pad)
    lead_lane: bool = True  # the first lane holds what the others do not (DataParallel's output device); False: all alike
    first_lane: int = 0  # the number the first lane goes by: torch's GPUs and ranks count from 0, a pipeline's stages from 1
    group_noun: str = ""  # what a grouped phase's span is of ("bucket", "sharded module"); empty: no phase is grouped
    words: dict[str, str] = field(default_factory=dict)  # sentences the views share ("gathered": ...)

    def __post_init__(self) -> None:
        for phase in self.phases:
            if phase.where not in (HOST, EVERY_LANE, ONE_LANE):
                raise ValueError(f"phase {phase.name!r} runs {phase.where!r}; phases run on {HOST}, {EVERY_LANE} or {ONE_LANE}")
            if phase.where == HOST and phase.color == "lane":
                raise ValueError(f"host phase {phase.name!r} needs a colour of its own: it runs on no lane")

    @cached_property
    def _by_name(self) -> dict[str, Phase]:
        return {p.name: p for p in self.phases}

    def phase(self, name: str) -> Phase:
        """The phase called `name`; KeyError names the engine's phases when there is none."""
        if name not in self._by_name:
            raise KeyError(f"{self.title} has no phase {name!r}; its phases are {', '.join(self.names)}")
        return self._by_name[name]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.phases)

    @cached_property
    def order(self) -> dict[str, int]:
        """Phase name -> its place in the pipeline."""
        return {p.name: i for i, p in enumerate(self.phases)}

    def where(self, where: str) -> tuple[str, ...]:
        """The names of the phases that run `where` (HOST, EVERY_LANE or ONE_LANE), in order."""
        return tuple(p.name for p in self.phases if p.where == where)

    @property
    def names_where_grouped(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.phases if p.grouped)

    @property
    def names_per_microbatch(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.phases if p.per_microbatch)

    @property
    def moving(self) -> tuple[Phase, ...]:
        """Its phases that move data between devices (a kind of the legend's), in order."""
        return tuple(p for p in self.phases if p.kind)

    @property
    def memory_names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.memory_kinds)

    def memory_kind(self, name: str) -> MemoryKind | None:
        return next((k for k in self.memory_kinds if k.name == name), None)

    def lane_name(self, lane: int) -> str:
        """How every view names lane `lane`: 'GPU 3'."""
        return f"{self.lane_noun} {lane + self.first_lane}"

    def word(self, key: str, **values: object) -> str:
        """One of the engine's shared sentences, with `values` filled in."""
        return self.words[key].format(**values)
