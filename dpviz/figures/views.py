"""Every view of a trace, registered once: the page's tabs and the HTML report's sections derive from it.

    for view in views_of(trace): view.tab, view.figures_for_report(trace)

A view names its figure function, how the page picks what it draws (`control`), what the report
shows of it, and the engines whose traces it can draw. VIEWS are the toolkit's, which several engines draw
each their own way (an engine names its function for each in its spec's parts); an engine's views of its own
(its spec's `own_views`, dpviz.engines.parts.View) take their places among them in `views_of`. Adding a view
every engine may draw is one entry here; adding an engine's own view is one entry in its spec.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from dpviz.analysis.batch_facts import chunks_per_batch, memory_batches
from dpviz.analysis.opening_step import opening_step
from dpviz.engines import ENGINES
from dpviz.trace import Trace
from dpviz.figures.bounds import DETAIL_BATCHES


def _drawn(view: str, name: str) -> Callable[..., Any]:
    """View `view` of a trace, drawn by the function the trace's engine names for it (its spec's
    "view.<view>" part, imported when first called): one name for every engine's traces."""

    def draw(trace: Trace, *args: Any, **kwargs: Any) -> Any:
        return trace.spec.part(f"view.{view}")(trace, *args, **kwargs)

    draw.__name__ = draw.__qualname__ = name
    draw.__doc__ = f"The {view} view of a trace, drawn by its engine's own function."
    return draw


def _then(view: str, name: str) -> Callable[..., Any]:
    """The second figure of view `view` the trace's engine draws under its first (its spec's "view.<view>.then"
    part), or None where it draws none."""

    def then(trace: Trace, *args: Any, **kwargs: Any) -> Any:
        part = f"view.{view}.then"
        return trace.spec.part(part)(trace, *args, **kwargs) if trace.spec.has(part) else None

    then.__name__ = then.__qualname__ = name
    return then


def _part(part: str, name: str) -> Callable[..., Any]:
    """The trace's engine's `part`, called with the trace."""

    def call(trace: Trace, *args: Any, **kwargs: Any) -> Any:
        return trace.spec.part(part)(trace, *args, **kwargs)

    call.__name__ = call.__qualname__ = name
    return call


one_step_any = _drawn("one_step", "one_step_any")
flow_any = _drawn("flow", "flow_any")
split_figure = _drawn("split", "split_figure")
timeline_figure = _drawn("timeline", "timeline_figure")
window_size = _part("timeline_window", "window_size")
sample_map_figure = _drawn("samples", "sample_map_figure")
step_figure = _drawn("step", "step_figure")
inputs_figure = _drawn("inputs", "inputs_figure")
argument_batches = _part("inputs_sampled", "argument_batches")
memory_figure = _drawn("memory", "memory_figure")
memory_then = _then("memory", "memory_then_figure")
pitfall_figure = _drawn("pitfall", "pitfall_figure")
bounded_log = _drawn("log", "bounded_log")

# How the page picks what a view draws: WHOLE the trace as it is; BATCH a slider over every batch;
# WINDOW a slider over windows of batches; SAMPLED a choice among the batches the trace sampled; TEXT
# a block of text, not a chart.
WHOLE, BATCH, WINDOW, SAMPLED, TEXT = "whole", "batch", "window", "sampled", "text"


@dataclass(frozen=True)
class View:
    """One view: its tab, its report section, its figure function and the engines it draws."""

    key: str  # widget keys on the page ("flow_batch") and the report's figure ids
    tab: str  # the page's tab
    heading: str  # the report's section heading
    anchor: str  # the report's section id
    build: Callable[..., Any]  # trace (and a batch, for BATCH and SAMPLED) -> plotly Figure, or text for TEXT
    control: str = WHOLE
    report: Callable[[Trace], list[tuple[str, Any]]] | None = None  # (figure id, figure); None: the whole view
    sampled: Callable[[Trace], list[int]] | None = None  # SAMPLED: the batches the trace sampled
    missing: str = ""  # SAMPLED: what the page says when the trace sampled none
    window: Callable[[Trace], int] | None = None  # WINDOW: how many batches one figure shows
    # WINDOW, for a trace with more batches than `detail_window` draws one by one: the figure of that many,
    # each batch drawn, for a class that wants to see them rather than the window's summary.
    detail: Callable[..., Any] | None = None
    detail_window: int = 0
    shown: Callable[[Trace], bool] | None = None  # whether this run has anything for it (None: always)
    then: Callable[..., Any] | None = None  # a second figure under the first, same arguments (None: nothing to draw)

    @property
    def engines(self) -> tuple[str, ...]:
        """The engines whose traces it draws: those that name a part for it (dpviz.engines.spec)."""
        return tuple(name for name, spec in ENGINES.items() if spec.has(f"view.{self.key}"))

    def draws(self, trace: Trace) -> bool:
        return trace.spec.has(f"view.{self.key}")

    def detail_for(self, trace: Trace) -> Callable[..., Any] | None:
        """The figure of a few batches each drawn, when the view and the trace's engine have one."""
        return self.detail if self.detail is not None and trace.spec.has(f"{self.key}_detail") else None

    def heading_for(self, trace: Trace) -> str:
        """The report's heading in the trace's own words: 'Memory per rank', 'Split per step' under DDP."""
        return self.heading.replace("per GPU", f"per {trace.vocabulary.lane_noun}").replace("per batch", f"per {trace.spec.unit}")

    def shows(self, trace: Trace) -> bool:
        """Whether the page gives this view a tab for `trace`: its engine draws it, and it has something."""
        return self.draws(trace) and (self.shown is None or self.shown(trace))

    def lacks(self, trace: Trace) -> str | None:
        """What `trace` lacks for this view to draw, in one sentence, or None when it draws: decided once, here, for
        the page (which says it in the view's place), the report (which leaves the view out) and the upload fuzzer."""
        if self.sampled is not None and not self.sampled(trace):
            return self.missing
        return trace.spec.part("view_lacks")(trace, self.key) if trace.spec.has("view_lacks") else None

    def figures_for_report(self, trace: Trace) -> list[tuple[str, Any]]:
        """What the report shows of this view: (figure id, figure or text) pairs, none when it has nothing."""
        if self.lacks(trace) is not None:
            return []
        if self.report is not None:
            return self.report(trace)
        shown = [(self.anchor, self.build(trace))]
        second = self.then(trace) if self.then is not None else None
        return shown + ([(f"{self.anchor}-then", second)] if second is not None else [])


def _flows(trace: Trace) -> list[tuple[str, Any]]:
    """The first batch, and the short last one when it splits differently."""
    last, chunks = len(trace.batches) - 1, chunks_per_batch(trace)
    batches = [0] + ([last] if last > 0 and chunks[last] != chunks[0] else [])
    return [(f"flow-batch-{b}", flow_any(trace, b)) for b in batches]


def _one_steps(trace: Trace) -> list[tuple[str, Any]]:
    """The step the page opens on."""
    if not trace.batches:
        return []
    step = opening_step(trace)
    return [(f"one-step-{step}", one_step_any(trace, step))]


def _memories(trace: Trace) -> list[tuple[str, Any]]:
    """The first sampled batch, and the last when it splits differently."""
    sampled, chunks = memory_batches(trace), chunks_per_batch(trace)
    shown = []
    for b in [b for b in sampled if b == sampled[0] or chunks[b] != chunks[sampled[0]]]:
        second = memory_then(trace, b)
        shown += [(f"memory-batch-{b}", memory_figure(trace, b))] + ([(f"memory-batch-{b}-then", second)] if second else [])
    return shown


def timeline_batches(trace: Trace, first: int) -> Any:
    """DETAIL_BATCHES batches from `first`, each drawn as measured (not one typical batch)."""
    return timeline_figure(trace, first, batches=min(DETAIL_BATCHES, window_size(trace)), detail=True)


def _pitfall(trace: Trace) -> list[tuple[str, Any]]:
    fig = pitfall_figure(trace)
    return [] if fig is None else [("pitfall", fig)]


def has_pitfall(trace: Trace) -> bool:
    """Whether the run ran into a pitfall the Pitfall view draws: its engine draws the view and says it applies
    (asked on every new run, so the engine answers without drawing the figure)."""
    return trace.spec.has("view.pitfall") and trace.spec.has("pitfall_shown") and trace.spec.part("pitfall_shown")(trace)


def _inputs(trace: Trace) -> list[tuple[str, Any]]:
    return [(f"inputs-batch-{b}", inputs_figure(trace, b)) for b in argument_batches(trace)]


VIEWS: tuple[View, ...] = (
    # First when a run has one: a pitfall preset's chart is the one a class came to see.
    View("pitfall", "Pitfall", "The pitfall, drawn", "pitfall", pitfall_figure, report=_pitfall, shown=has_pitfall),
    # Then every engine's step in one layout: a class flips the engine and points at what changed.
    View("one_step", "One step", "One step, every device", "one-step", one_step_any, BATCH, report=_one_steps),
    View("flow", "Flow", "Flow of a batch", "flow", flow_any, BATCH, report=_flows),
    View("split", "Split", "Split per batch", "split", split_figure),  # the tab short: ten tabs fit 1024 pixels
    View("timeline", "Timeline", "Timeline", "timeline", timeline_figure, WINDOW, window=window_size,
         detail=timeline_batches, detail_window=DETAIL_BATCHES),
    View("samples", "Sample map", "Sample map", "sample-map", sample_map_figure),
    View("step", "Step through", "Step through a batch", "step", step_figure, BATCH),
    View("inputs", "Inputs", "What each GPU received", "inputs", inputs_figure, SAMPLED, report=_inputs,
         sampled=argument_batches,
         missing="This file records no replica's arguments (a file of a dpviz before trace version 2, or one edited "
                 "since), so there is nothing to show of what each replica received."),
    View("memory", "Memory", "Memory per GPU", "memory", memory_figure, SAMPLED, report=_memories,
         sampled=memory_batches, missing="This trace holds no memory figures.", then=memory_then),
    View("log", "Tutorial log", "Tutorial log", "log", bounded_log, TEXT, report=lambda trace: [("log", bounded_log(trace))]),
)


def views_of(*traces: Trace) -> list[View]:
    """The toolkit's views, and the views of their own of the engines of `traces`, each after the view it names."""
    shown = list(VIEWS)
    for name in dict.fromkeys(trace.engine for trace in traces):
        for own in ENGINES[name].own_views:
            if all(view.key != own.key for view in shown):
                at = next((i + 1 for i, view in enumerate(shown) if view.key == own.after), len(shown))
                shown.insert(at, _own_view(own))
    return shown


def _own_view(own: Any) -> View:
    """An engine's own view (dpviz.engines.parts.View) as the page and the report take every view."""
    build = _drawn(own.key, f"{own.key}_figure")
    then = _drawn(f"{own.key}.then", f"{own.key}_then_figure") if own.then is not None else None
    shown = None
    if own.shown is not None:
        def shown(trace: Trace) -> bool:
            return own.shown.load()(trace)

        shown.__name__ = f"{own.key}_shown"  # the page caches what a view's function gave a trace by its name
    if own.control == "whole":
        return View(own.key, own.tab, own.tab, own.key, build, shown=shown, then=then)

    def report(trace: Trace) -> list[tuple[str, Any]]:
        if not trace.batches:
            return []
        second = then(trace, 0) if then is not None else None
        return [(f"{own.key}-batch-0", build(trace, 0))] + ([(f"{own.key}-batch-0-then", second)] if second else [])

    return View(own.key, own.tab, own.tab, own.key, build, BATCH, shown=shown, report=report, then=then)
