"""What an engine declares about itself, in one object the registry returns: everything that differs from
one engine to another, so that nothing outside the engine's package asks which engine a trace came from.

    spec = ENGINES[trace.engine]         # dpviz.engines' registry
    spec.label, spec.unit                # 'DistributedDataParallel', 'step'
    spec.part("summary")(trace)          # its key figures, imported when first asked for
    spec.has("view.inputs")              # whether it draws the Inputs view at all

Plain data, and its parts (dpviz.engines.parts.Parts: each typed by the Protocol it follows, named
"module:attribute" and imported only when used): reading the spec imports no torch, no pandas, no plotly.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from dpviz.engines.parts import Parts, View


@dataclass(frozen=True)
class Option:
    """A setting only some engines read: its widget on the page and its flag on the command line."""

    name: str  # the field of the engine's options (RunConfig.options), the link's key; the flag is --name-with-dashes
    unset: Any  # the value that means "not set" (the one every other engine's config holds): the field's default
    label: str  # the page's widget label
    help: str  # the widget's help and the flag's help
    kind: str = "flag"  # "flag" (a toggle), "whole" (a whole number within `limits`), "mib" (a fraction within
    # `limits`, or none), "choice" (one of `choices`)
    limits: tuple[float, float] | None = None
    choices: tuple[str, ...] = ()


def option(default: Any, label: str, help: str, kind: str = "flag", limits: tuple[float, float] | None = None,
           choices: tuple[str, ...] = ()) -> Any:
    """A field of an engine's options dataclass, with what its widget and flag say (its name is the field's)."""
    return field(default=default, metadata={"option": (label, help, kind, limits, choices)})


def same(options: type, name: str) -> Any:
    """Field `name` of another engine's options, declared again as it is there: an option two engines share (the
    link's key, the widget and the flag are one)."""
    declared = next(each for each in fields(options) if each.name == name)
    return field(default=declared.default, metadata=declared.metadata)


def options_of(options: type | None) -> tuple[Option, ...]:
    """An options dataclass's fields as Options, in its order (the page's, the flags' and a trace file's)."""
    if options is None:
        return ()
    return tuple(Option(each.name, each.default, *each.metadata["option"]) for each in fields(options))


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
    parts: Parts
    options_title: str = ""  # the heading of its options on the page, when it has any
    # Its own settings, a frozen dataclass of `option` fields declared in its package (RunConfig.options holds one)
    options_type: type | None = None
    facts: tuple[str, ...] = ()  # the keys of trace.facts its traces may carry
    preload: tuple[str, ...] = ()  # modules the forkserver imports for its runs (dpviz.engines.processes)
    # Drawn on "Memory, every engine", where every engine runs the same rows on every device; False for an engine
    # whose devices hold different layers (a pipeline's stages), compared in pairs instead
    memory_page: bool = True
    # Settings a link naming this engine and none of them opens with, and why: an engine whose lesson is what training
    # holds (ZeRO-1's sharded optimizer state, FSDP's gathers and reduce-scatters) shows nothing of it forward only.
    opens_with: tuple[tuple[str, Any], ...] = ()
    opens_why: str = ""
    # Settings a link comparing this engine with another opens with, where it names none of them, and why: its part
    # of a comparison's lesson (DataParallel's GPU 0 as the hub) needs them, which the page's defaults do not give.
    compared_opens_with: tuple[tuple[str, Any], ...] = ()
    compared_opens_why: str = ""
    # Settings only its plan reads (dpviz.engines.plan), no run: a tensor-parallel degree beside FSDP's, where a run
    # takes every rank as one group. Each a keyword-only parameter of its `plan` part, its flag on `plan`, its widget
    # on the page's "At real size".
    plan_settings: tuple[Option, ...] = ()

    @property
    def options(self) -> tuple[Option, ...]:
        """Its own settings, as the page's widgets and the command line's flags offer them."""
        return options_of(self.options_type)

    @property
    def unset(self) -> dict[str, Any]:
        """Its options at the values that mean "not set"."""
        return {option.name: option.unset for option in self.options}

    @property
    def own_views(self) -> tuple[View, ...]:
        return self.parts.own_views

    def has(self, part: str) -> bool:
        return self._reference(part) is not None

    def part(self, part: str) -> Any:
        """The function or object the engine names for `part` ("summary", "view.flow"), imported now; KeyError
        when it names none."""
        reference = self._reference(part)
        if reference is None:
            raise KeyError(f"{self.label} has no {part}")
        return reference.load()

    def _reference(self, part: str) -> Any:
        if part.startswith("view."):
            key, then = part[len("view."):].removesuffix(".then"), part.endswith(".then")
            own = next(((view.then if then else view.draw) for view in self.parts.own_views if view.key == key), None)
            return self.parts.views.get(f"{key}.then" if then else key, own)
        if part in ("views", "own_views"):
            return None
        return getattr(self.parts, part, None)
