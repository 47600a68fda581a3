"""The parts an engine names, typed: one Protocol per part says how dpviz calls it, and `Parts` holds an engine's
parts as lazy references ("module:attribute", imported when first used), so declaring an engine imports no
torch, no pandas, no plotly.

    Parts(summary="dpviz.engines.ddp.read.summary:key_figures", ...)   # strings become Lazy references
    parts.summary.load()(trace)                                       # imported now

A part whose function takes other arguments than its Protocol's is found by dpviz.engines.conformance
(tests/test_engine_parts.py runs it for every registered engine), not by the first page that calls it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import import_module
from typing import Any, Generic, Iterator, Mapping, Protocol, TypeVar

T = TypeVar("T")
# What the Protocols' arguments are, named and not imported: these declarations sit below the config and the trace,
# which look engines up here (an import of them would run back up).
Trace = Any  # dpviz.trace.Trace
RunConfig = Any  # dpviz.config.RunConfig


# ---- how dpviz calls each part (the parameters' names are the documentation; their kinds are checked)

class Check(Protocol):
    def __call__(self, trace: Trace) -> None: """ValueError (one sentence) unless a loaded trace is what it could record."""

class Batches(Protocol):
    def __call__(self, config: RunConfig) -> int: """A run's batches (DataParallel) or steps (DDP) for a config."""

class ConfigProblem(Protocol):
    def __call__(self, config: RunConfig) -> str | None: """The sentence that refuses settings that do not go together."""

class Fit(Protocol):
    def __call__(self, values: dict) -> dict: """The smallest change that makes a link's settings go together."""

class ReadFacts(Protocol):
    def __call__(self, facts: Mapping[str, Any]) -> dict[str, Any]: """The engine's own facts of a loaded trace, checked."""

class OfTrace(Protocol):
    def __call__(self, trace: Trace) -> Any: """Something read from a trace alone: key figures, a log, a heading."""

class Devices(Protocol):
    def __call__(self, trace: Trace, here_text: str) -> str: """A markdown sentence on the lanes, and this machine."""

class Outcome(Protocol):
    def __call__(self, trace: Trace, config: RunConfig, ranked: bool) -> int:
        """The command line's last line (on stderr) and its exit status."""

class MemoryWhy(Protocol):
    def __call__(self, trace: Trace, table: Any, unit: Any) -> str | None: """The Memory view's note."""

class MovesAt(Protocol):
    def __call__(self, sizes: Any, devices: int) -> list[tuple[int, int]]:
        """(sent, received) bytes per device in one step at a device count, by the engine's formula."""

class CompareLesson(Protocol):
    def __call__(self, trace: Trace, other: Trace) -> Any:
        """dpviz.analysis.compare.Lesson: whether `trace` beside `other` shows the engine's lesson."""


class Plan(Protocol):
    def __call__(self, shape: Any, gpus: int, optimizer: str, **options: Any) -> list[dict[str, int]]:
        """A model's bytes per device (parameters, gradients, optimizer state, activations, sent) from its shapes
        (dpviz.engines.plan_rules.ModelShape). `options`: those of its own options it names as keyword-only
        parameters (a pipeline's schedule). ValueError (one sentence) when it cannot run the model so."""

class PlanLayers(Protocol):
    def __call__(self, model: Any, example: Any, catalogue: str | None) -> list[tuple[str, Any]]:
        """The model's layers, in order, each (name, module), as the engine cuts it; ValueError (one sentence)
        when it cannot. `catalogue`: the catalogue's name for the model, None for one's own."""

class TimelineRange(Protocol):
    def __call__(self, trace: Trace, first_batch: int, last_batch: int, *, show: str, detail: bool | None) -> Any:
        """The Timeline of those batches."""

class TimelineDetail(Protocol):
    def __call__(self, trace: Trace, first: int) -> Any: """A few batches from `first`, each drawn as measured."""

class OwnBatch(Protocol):
    def __call__(self, work: Any, scattered: Any) -> str | None: """Why it cannot run a user's batch."""

class Whole(Protocol):
    def __call__(self, trace: Trace) -> Any: """A view of the whole trace (a figure, or text)."""

class OfBatch(Protocol):
    def __call__(self, trace: Trace, batch: int) -> Any: """A view of one batch or step."""

class Timeline(Protocol):
    def __call__(self, trace: Trace, first_batch: int = 0, batches: int | None = None, *, show: str = "both",
                 detail: bool | None = None) -> Any: """The Timeline view from a batch."""

class SampledBatches(Protocol):
    def __call__(self, trace: Trace) -> list[int]: """The batches a view can show of this trace."""

class Lacks(Protocol):
    def __call__(self, trace: Trace, view: str) -> str | None: """What the trace lacks for view `view`, in one sentence, or None."""

class Applies(Protocol):
    def __call__(self, trace: Trace) -> bool: """Whether a view has anything to show for this trace."""


# The views every engine's parts may draw, by key, and how dpviz.figures.views calls each.
VIEW_CALLS: dict[str, type] = {"pitfall": Whole, "one_step": OfBatch, "flow": OfBatch, "split": Whole, "timeline": Timeline,
                               "samples": Whole, "step": OfBatch, "inputs": OfBatch, "memory": OfBatch, "log": Whole}


class Lazy(Generic[T]):
    """A part named by "module:attribute", imported when first loaded (then kept)."""

    __slots__ = ("where",)

    def __init__(self, where: str) -> None:
        if where.count(":") != 1:
            raise ValueError(f"a part is named 'module:attribute', got {where!r}")
        self.where = where

    def load(self) -> T:
        return _load(self.where)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lazy) and other.where == self.where

    def __hash__(self) -> int:
        return hash(self.where)

    def __repr__(self) -> str:
        return f"Lazy({self.where!r})"


@lru_cache(maxsize=None)
def _load(where: str) -> Any:
    module, attribute = where.split(":")
    return getattr(import_module(module), attribute)


def _lazy(where: Any) -> Any:
    return Lazy(where) if isinstance(where, str) else where


@dataclass(frozen=True)
class View:
    """A view an engine draws that the toolkit's views do not have: its tab, where it stands, how it is drawn."""

    key: str  # widget keys, the report's anchor, the link's view name
    tab: str  # the page's tab and the report's heading
    draw: Lazy[Any]  # trace -> figure (control "whole"), or (trace, batch) -> figure ("batch")
    control: str = "whole"  # "whole" or "batch" (a slider over the batches)
    after: str = "timeline"  # the tab it follows
    # A second figure drawn under the first with the same arguments (or None, for nothing): what the lesson does not
    # need on a projector's first screen but a class asks next (the pipeline's wall clock under its replayed bubble).
    then: Lazy[Any] | None = None
    # Whether a trace has anything for it (FSDP's mesh only for a run with a tensor-parallel degree); None: always
    shown: Lazy[Applies] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "draw", _lazy(self.draw))
        object.__setattr__(self, "shown", _lazy(self.shown))
        if self.then is not None:
            object.__setattr__(self, "then", _lazy(self.then))
        if self.control not in ("whole", "batch"):
            raise ValueError(f"view {self.key!r}: control must be 'whole' or 'batch', got {self.control!r}")

    @property
    def call(self) -> type:
        return Whole if self.control == "whole" else OfBatch


@dataclass(frozen=True)
class Parts:
    """Everything an engine names that differs from another engine, each typed by the Protocol it must follow."""

    vocabulary: Lazy[Any]  # dpviz.trace.vocabulary.Vocabulary: its phases, lanes and memory kinds
    engine: Lazy[Any]  # dpviz.engines.base.Engine: the recording side (torch, imported when a run is asked for)
    check: Lazy[Check]
    batches: Lazy[Batches]
    facts: Lazy[ReadFacts]
    summary: Lazy[OfTrace]  # key_figures(trace) -> {label: text}
    summary_rows: Lazy[OfTrace]  # rows(trace) -> [(key figure, value)]
    explain: Lazy[OfTrace]  # explain(trace) -> [markdown paragraphs]
    log: Lazy[OfTrace]  # the tutorial-style log, one string
    chrome_events: Lazy[OfTrace]  # an iterator of Chrome trace events
    devices: Lazy[Devices]
    note: Lazy[OfTrace]  # a figure's footnote: real or simulated, processes or threads
    report_heading: Lazy[OfTrace]
    outcome: Lazy[Outcome]
    model_bytes: Lazy[OfTrace]  # (parameters, gradients) bytes
    traffic: Lazy[OfTrace]  # [Move]: what each device sent and received, from the trace
    memory_why: Lazy[MemoryWhy]
    timeline_range: Lazy[TimelineRange]
    timeline_window: Lazy[OfTrace]  # how many batches one Timeline shows
    log_header: Lazy[OfTrace] | None = None
    config_problem: Lazy[ConfigProblem] | None = None
    fit: Lazy[Fit] | None = None
    # What each rank of a process engine runs (dpviz.engines.ranks.program.RankProgram): torch, loaded by its ranks
    rank_program: Lazy[Any] | None = None
    moves_at: Lazy[MovesAt] | None = None
    # Whether a comparison's settings can show what this engine is compared for, and what to change if not
    compare_lesson: Lazy[CompareLesson] | None = None
    plan: Lazy[Plan] | None = None  # a model's memory per device, from its shapes (python -m dpviz plan)
    plan_layers: Lazy[PlanLayers] | None = None  # the layers a plan measures one by one (ModelShape.layers)
    # One sentence a mixed-precision Adam plan says of this engine beside the ZeRO paper's figures (where they differ)
    paper_note: Lazy[str] | None = None
    timeline_detail: Lazy[TimelineDetail] | None = None
    own_batch: Lazy[OwnBatch] | None = None
    # The step Memory opens on where it differs from the views' (ZeRO-1: one whose devices hold their own shards)
    memory_opening: Lazy[OfTrace] | None = None
    pitfall_shown: Lazy[Applies] | None = None  # whether the Pitfall view has anything for this trace
    inputs_sampled: Lazy[SampledBatches] | None = None  # the batches whose arguments the trace kept
    # What a loaded file lacks for one of its views (a field an edited file left out), said in that view's place
    view_lacks: Lazy[Lacks] | None = None
    # The toolkit's views it draws (dpviz.figures.views), by key: a view with no entry is not shown for its traces;
    # "<key>.then", a second figure under the view's, with the same arguments (the pipeline's Memory: what each stage
    # holds for the whole run, under the lesson, its activations in flight, that a projector's first screen holds).
    views: Mapping[str, Lazy[Any]] = field(default_factory=dict)
    own_views: tuple[View, ...] = ()  # views of its own, beside the toolkit's

    def __post_init__(self) -> None:
        for each in dataclasses.fields(self):
            value = getattr(self, each.name)
            if isinstance(value, str):
                object.__setattr__(self, each.name, Lazy(value))
        object.__setattr__(self, "views", {key: _lazy(where) for key, where in self.views.items()})
        unknown = {key.removesuffix(".then") for key in self.views} - set(VIEW_CALLS)
        if unknown:
            raise ValueError(f"views {sorted(unknown)} are not the toolkit's ({', '.join(VIEW_CALLS)}): declare them "
                             "as own_views")

    def named(self) -> Iterator[tuple[str, Lazy[Any], type | None]]:
        """(name, reference, the Protocol it follows) of every part it names; views as "view.<key>"."""
        hints = _protocols()
        for each in dataclasses.fields(self):
            value = getattr(self, each.name)
            if isinstance(value, Lazy):
                yield each.name, value, hints.get(each.name)
        for key, reference in self.views.items():
            yield f"view.{key}", reference, VIEW_CALLS[key.removesuffix(".then")]
        for view in self.own_views:
            yield f"view.{view.key}", view.draw, view.call
            if view.then is not None:
                yield f"view.{view.key}.then", view.then, view.call
            if view.shown is not None:
                yield f"view.{view.key}.shown", view.shown, Applies


@lru_cache(maxsize=None)
def _protocols() -> dict[str, type]:
    """Each field's Protocol, read from its annotation ("Lazy[Check] | None" -> Check)."""
    found = {}
    for each in dataclasses.fields(Parts):
        name = str(each.type).split("[", 1)[-1].split("]", 1)[0]
        protocol = globals().get(name)
        if isinstance(protocol, type) and getattr(protocol, "_is_protocol", False):
            found[each.name] = protocol
    return found
