"""One unit per figure: every figure that puts bytes on an axis plots them in one binary unit, named in the axis's
title, with plain ticks of it (never plotly's SI "15M"), and writes every amount of its titles and notes in it.

The figures: every view of the figure-trace fixtures (DataParallel's recorded runs, DDP's), the Both page's
Compare figure, the Memory page's figure of every engine, the pipeline's memory view and the plan at real size.
A plotted value is checked against the amount the hover says for it, converted: what the ticks read is what
the hover says."""
from __future__ import annotations

import dataclasses
import re
from functools import cache

import pytest

from ddp_traces import ddp_trace
from dpviz.config import RunConfig
from dpviz.engines import engine
from dpviz.figures.text_fit import unwrap
from dpviz.figures.views import TEXT, views_of
from figure_traces import recorded

UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}
AMOUNT = re.compile(r"(<?)(\d[\d,]*(?:\.\d+)?) (B|KiB|MiB|GiB|TiB)\b")
AXIS_UNIT = re.compile(r"\((B|KiB|MiB|GiB|TiB)\)$")
SMALL = dict(gpus=2, train=True, batch_size=8, data_size=16)


def texts(fig) -> list[str]:
    """Every text of the figure a reader reads as words: its title and notes, subplot titles and annotations."""
    title = fig.layout.title
    found = [title.text or "", (title.subtitle.text or "") if title.subtitle else ""]
    found += [a.text or "" for a in fig.layout.annotations]
    return [unwrap(t) for t in found]


def byte_axes(fig) -> dict[str, object]:
    """The axes that count bytes: their title names a binary unit or bytes."""
    axes = {}
    for key in fig.layout:
        if re.fullmatch(r"[xy]axis\d*", key):
            axis = fig.layout[key]
            title = (axis.title.text or "") if axis.title else ""
            if AXIS_UNIT.search(title) or "bytes" in title.lower():
                axes[key] = axis
    return axes


def on_axis(trace, key: str) -> bool:
    letter, number = key[0], key[5:]
    return (getattr(trace, f"{letter}axis", None) or letter) == f"{letter}{number}"


def hover_amounts(trace) -> list[tuple[int, float, float]]:
    """(point, the first amount of bytes its customdata says, half its last written digit in bytes), for the points
    whose hover names one (not a sliver written "<0.01", too small to read back)."""
    out = []
    for i, data in enumerate(trace.customdata if trace.customdata is not None else []):
        words = " ".join(str(d) for d in (data if isinstance(data, (list, tuple)) else [data]))
        found = AMOUNT.search(words)
        if found is not None and not found[1]:
            number, size = found[2].replace(",", ""), UNITS[found[3]]
            decimals = len(number.partition(".")[2])
            out.append((i, float(number) * size, 0.5 * 10**-decimals * size))
    return out


def check_one_unit(fig, name: str) -> None:
    axes = byte_axes(fig)
    assert axes, f"{name}: no axis of bytes found"
    units = set()
    for key, axis in axes.items():
        named = AXIS_UNIT.search(axis.title.text)
        assert named, f"{name}: {key} titled {axis.title.text!r} names no unit its ticks are read in"
        units.add(named[1])
        if axis.type != "category":  # plotly's own ticks: plain numbers of the unit, never "15M"
            assert axis.exponentformat == "none" or axis.ticktext is not None, f"{name}: {key} ticks in SI"
    assert len(units) == 1, f"{name}: axes in {units}"
    (unit,) = units
    for text in texts(fig):
        for _, _, said in AMOUNT.findall(text):
            assert said == unit, f"{name}: {text!r} says {said}, the axes {unit}"
    checked = 0
    for key, axis in axes.items():
        if axis.type == "category":
            continue
        letter = key[0]
        for trace in fig.data:
            if not on_axis(trace, key) or trace.type not in ("bar", "scatter"):
                continue
            values = list(getattr(trace, letter))
            for i, amount, rounding in hover_amounts(trace):
                # the plotted value, read in the axis's unit, is the hover's amount, as rounded where written
                assert values[i] * UNITS[unit] == pytest.approx(amount, abs=rounding * 1.001), \
                    f"{name}: {trace.name} point {i} plots {values[i]} {unit}, its hover says {amount} B"
                checked += 1
    assert checked, f"{name}: no plotted amount checked against its hover"


@cache
def both(**settings):
    config = RunConfig(engine="ddp", **settings)
    return tuple(engine(name).record(dataclasses.replace(config, engine=name)) for name in ("dp", "ddp"))


@cache
def every_engine():
    config = RunConfig(engine="ddp", **SMALL)
    return [engine(name).record(dataclasses.replace(config, engine=name, **({} if name == "dp" else {"optimizer": "adam"})))
            for name in ("dp", "ddp", "zero1", "fsdp")]


def view_figures(trace) -> list[tuple[str, object]]:
    """Every figure the views draw of `trace`, as the report shows them."""
    found = []
    for view in views_of(trace):
        if view.draws(trace) and view.control != TEXT and view.shows(trace):
            found += [(f"{trace.engine} {key}", fig) for key, fig in view.figures_for_report(trace)
                      if hasattr(fig, "layout")]
    return found


def test_every_view_of_the_fixtures_that_counts_bytes_reads_in_one_unit():
    traces = [recorded(gpus=3, train=True), recorded(gpus=8, train=True), ddp_trace("two_train")]
    shown = [(name, fig) for trace in traces for name, fig in view_figures(trace) if byte_axes(fig)]
    assert {name.split()[0] for name, _ in shown} == {"dp", "ddp"}  # the memory views of both
    for name, fig in shown:
        check_one_unit(fig, name)


@pytest.mark.parametrize("settings", [dict(), dict(gpus=4, train=True, model="mlp", data_size=96, batch_size=32),
                                      dict(gpus=3, train=True, model="mlp", input_size=512, output_size=512,
                                           data_size=128, batch_size=64)])
def test_the_compare_figure_reads_in_one_unit(settings):
    from dpviz.figures.compare import comparison_figure, growth_figure

    check_one_unit(comparison_figure(*both(**settings)), f"compare {settings}")
    check_one_unit(growth_figure(*both(**settings)), f"growth {settings}")


def test_the_memory_of_every_engine_reads_in_one_unit():
    from dpviz.figures.memory_compare import bytes_per_step_figure, memory_compare_figure

    check_one_unit(memory_compare_figure(every_engine()), "memory every engine")
    check_one_unit(bytes_per_step_figure(every_engine()), "bytes every engine")


def test_the_pipelines_memory_reads_in_one_unit():
    trace = engine("pipeline").record(RunConfig(engine="pipeline", train=True, inputs="tensor", data_size=64,
                                                batch_size=16, model="mlp", gpus=2, schedule="1f1b", microbatches=4))
    assert trace.failure is None
    # What each stage holds, a chart of its own under the activations' (the view's second figure), in their unit.
    held = trace.spec.part("view.memory.then")(trace, 0)
    check_one_unit(held, "pipeline memory held")
    activations = trace.spec.part("view.memory")(trace, 0)
    (title,) = [a.text for a in activations.layout.annotations if a.textangle == -90]  # the stages' one axis title
    (axis,) = byte_axes(held).values()
    assert AXIS_UNIT.search(title)[1] == AXIS_UNIT.search(axis.title.text)[1], (title, axis.title.text)


def test_the_plan_at_real_size_reads_in_one_unit():
    from dpviz.engines.plan import plan
    from dpviz.figures.plan import plan_figure

    # A sequence per GPU, as the page plans it: at 8 a pipeline of 8 stages is drawn, at 1,024 it is refused (GPT-2
    # small has 14 layers) and its place says so with no amount.
    for gpus, memory in ((8, 80), (1024, 24)):
        found = plan("transformer", size="gpt2-small", gpus=gpus, optimizer="adam", rows=gpus)
        assert ("refused" in found["engines"]["pipeline"]) == (gpus == 1024)
        check_one_unit(plan_figure(found, memory, "GPT-2 small"), f"plan {gpus}")


def test_the_check_finds_a_figure_in_two_units():
    """Plotly's SI ticks under a title in MiB, as the Compare figure was drawn: the check above fails on it."""
    import plotly.graph_objects as go

    fig = go.Figure(go.Bar(x=["GPU 0"], y=[15 * 2**20], customdata=["15.0 MiB"]))
    fig.update_layout(title_text="GPU 0 sends 15.0 MiB", yaxis_title_text="bytes per step")
    with pytest.raises(AssertionError, match="names no unit"):
        check_one_unit(fig, "bytes")
    fig.update_layout(yaxis_title_text="sent per step (MiB)")
    with pytest.raises(AssertionError, match="SI"):
        check_one_unit(fig, "SI ticks")
    fig.update_layout(yaxis_exponentformat="none")
    with pytest.raises(AssertionError, match="its hover says"):
        check_one_unit(fig, "bytes plotted")
    fig.update_traces(y=[15.0])
    check_one_unit(fig, "one unit")
