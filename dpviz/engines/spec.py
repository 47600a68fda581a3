"""What an engine declares about itself, in one object the registry returns: everything that differs from
one engine to another, so that nothing outside the engine's package asks which engine a trace came from.

    spec = ENGINES[trace.engine]         # dpviz.engines' registry
    spec.label, spec.unit                # 'DistributedDataParallel', 'step'
    spec.part("summary")(trace)          # its key figures, imported when first asked for
    spec.has("view.inputs")              # whether it draws the Inputs view at all

Plain data and the names of functions ("module:attribute"), imported only when used: reading the spec
imports no torch, no pandas, no plotly.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import import_module
from typing import Any, Mapping

# The parts an engine may name (`parts`), each a "module:attribute". The views' parts draw a view of a
# trace of this engine; a view an engine names no part for is not shown for its traces.
PARTS = {
    "vocabulary": "its phases, lanes and memory kinds (dpviz.trace.vocabulary.Vocabulary)",
    "engine": "the recording side (dpviz.engines.base.Engine): torch, imported when a run is asked for",
    "check": "check_trace(trace): ValueError unless a loaded trace is what it could have recorded (no torch)",
    "batches": "batches(config) -> int: a run's batches (DataParallel) or steps (DDP) for a config",
    "config_problem": "problem(config) -> str | None: the sentence that refuses settings that do not go together",
    "fit": "fit(values) -> dict: the smallest change that makes a link's settings go together",
    "wrap": "wrap(model, config, rank, cuda, local_rank, memory_steps) -> (what a step calls, its observer, "
            "seconds): how a rank wraps its model (DDP's own when an engine names none)",
    "optimizer": "build(parameters, kind, settings, passed) -> (the optimizer a rank steps, the one whose state it "
                 "holds); passed(collective, bytes, calls) writes down what its own collectives are handed",
    "facts": "read(facts) -> dict: the engine's own facts of a loaded trace, checked (for the keys in `facts`)",
    "summary": "key_figures(trace) -> dict", "summary_rows": "rows(trace) -> [(key figure, value)]",
    "explain": "explain(trace) -> [markdown paragraphs]",
    "log": "tutorial_log(trace) -> str", "log_header": "header(trace) -> str | None",
    "chrome_events": "events(trace) -> iterator of Chrome trace events",
    "devices": "describe(trace, here) -> a markdown sentence on the lanes", "note": "note(trace) -> a figure's footnote",
    "report_heading": "heading(trace) -> str", "outcome": "outcome(trace, config, ranked) -> (line, exit status)",
    "model_bytes": "model_bytes(trace) -> (parameters, gradients)", "traffic": "traffic(trace) -> [Move]",
    "wire": "wire(trace) -> [bytes per step] per lane: what each sends by the textbook algorithm (computed)",
    "memory_why": "why(trace, table, unit) -> str | None: the Memory view's note",
    "timeline_range": "draw(trace, first, last, show=, detail=) -> Figure: the Timeline of those batches",
    "timeline_window": "window(trace) -> int: the batches one Timeline shows",
    "timeline_detail": "draw(trace, first) -> Figure: a few batches, each drawn as measured",
    "own_batch": "problem(workload, first_scattered_tensor) -> str | None: why it cannot run a user's batch",
    "opening_batch": "opening(trace) -> int: the 0-based batch or step the views open on (a typical one)",
}


@dataclass(frozen=True)
class Option:
    """A setting only some engines read: its widget on the page and its flag on the command line."""

    name: str  # the RunConfig field, the link's key; the flag is --name-with-dashes
    unset: Any  # the value that means "not set" (the one every other engine's config holds)
    label: str  # the page's widget label
    help: str  # the widget's help and the flag's help
    kind: str = "flag"  # "flag" (a toggle), "whole" (a whole number within config.LIMITS), "mib" (a fraction or none),
    # "choice" (one of config.CHOICES)


@dataclass(frozen=True)
class EngineSpec:
    """One engine, as the page, the command line, the loader and every reader see it."""

    name: str  # the config's, the link's and --engine's word: "dp"
    label: str  # "DataParallel": the engine control, headings, comparisons
    short: str  # "DDP": where two engines share a sentence
    runs: str  # "nn.DataParallel": what it runs, in --engine's help and the page's notes
    title: str  # the page's heading when it runs alone
    unit: str  # what one entry of trace.batches is called: a DataLoader "batch", or DDP's "step" (a batch per rank)
    lanes_label: str  # the lane count's control: "Number of GPUs"
    lane_files: str  # "gpus": file names say how many ("dpviz-dp-simulated-4gpus.json")
    processes: bool  # each lane a process of its own: the page's budget holds one share per lane, torchrun runs it
    options_title: str = ""  # the heading of its options on the page, when it has any
    options: tuple[Option, ...] = ()
    facts: tuple[str, ...] = ()  # the keys of trace.facts its traces may carry
    parts: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for part in self.parts:
            if part not in PARTS and not part.startswith("view."):
                raise ValueError(f"engine {self.name!r} names part {part!r}; the parts are {', '.join(PARTS)} and view.*")

    @property
    def unset(self) -> dict[str, Any]:
        """Its options at the values that mean "not set"."""
        return {option.name: option.unset for option in self.options}

    def has(self, part: str) -> bool:
        return part in self.parts

    def part(self, part: str) -> Any:
        """The function or object the engine names for `part`, imported now; KeyError when it names none."""
        if part not in self.parts:
            raise KeyError(f"{self.label} has no {part}")
        return _load(self.parts[part])


@lru_cache(maxsize=None)
def _load(where: str) -> Any:
    module, attribute = where.split(":")
    return getattr(import_module(module), attribute)
