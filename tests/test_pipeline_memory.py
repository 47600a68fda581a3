"""A pipeline's Memory view: each stage's activations in a panel of its own, one scale for all, pass by pass as the
trace's facts "flight" record them, the stage named beside its panel; what each stage holds in bars, a chart of its
own under them (the view's second figure: the two ran past a projector's first screen).

Drawn over each other, the stages' step lines rose and fell at the same passes and ran along and across each other
(stage 1's blue under stage 2's orange, 2.4:1): one panel per stage leaves no line on another.

Two small real runs, recorded once (one gloo process per stage): the MLP as 2 stages under GPipe, the transformer
as 4 stages under 1F1B. The plan of their settings keeps as many microbatches on each stage as the run held.
"""
from __future__ import annotations

from functools import cache

import pytest

from dpviz.config import RunConfig
from dpviz.engines import engine
from dpviz.engines.pipeline.read.memory import held_pipeline_figure, memory_pipeline_figure
from dpviz.figures.byte_unit import byte_unit
from dpviz.figures.colors import device_color
from dpviz.figures.presenting import presentation
from dpviz.figures.text_fit import text_px, unwrap

RUNS = {
    "gpipe": dict(model="mlp", gpus=2, data_size=64, batch_size=16, microbatches=4, schedule="gpipe"),
    "1f1b": dict(model="transformer", gpus=4, data_size=64, batch_size=32, microbatches=8, schedule="1f1b"),
}


@cache
def run(name: str):
    trace = engine("pipeline").record(RunConfig(engine="pipeline", train=True, inputs="tensor", **RUNS[name]))
    assert trace.failure is None
    return trace


def _lines(fig):
    return [t for t in fig.data if t.type == "scatter"]


def _domain(fig, trace) -> tuple[float, float]:
    return tuple(fig.layout["yaxis" + (trace.yaxis or "y")[1:]].domain)


@pytest.mark.parametrize("name", list(RUNS))
def test_each_stage_draws_its_activations_in_a_panel_of_its_own(name):
    trace = run(name)
    flight = trace.facts["flight"]
    for step in (0, len(trace.batches) - 1):
        fig = memory_pipeline_figure(trace, step)
        lines = _lines(fig)
        stages = len(flight)
        assert [t.name for t in lines] == [f"stage {s + 1}" for s in range(stages)]
        assert len({t.yaxis for t in lines}) == stages  # no two stages' lines on one panel
        # Top to bottom in stage order, none overlapping the next.
        domains = [_domain(fig, t) for t in lines]
        assert all(upper[0] > lower[1] for upper, lower in zip(domains, domains[1:]))
        held = trace.facts["held"]
        kinds = ("parameters", "gradients", "optimizer state")
        unit = byte_unit(max([row[3] for stage in flight for row in stage]
                             + [sum(h[k]["bytes"] for k in kinds) for h in held]))
        ranges = set()
        for stage, line in enumerate(lines):
            rows = [row for row in flight[stage] if row[0] == step]
            assert line.line.color == device_color(stage) and not line.showlegend
            assert list(line.x) == list(range(1, len(rows) + 1))
            assert [y * unit.size for y in line.y] == pytest.approx([row[3] for row in rows])  # the bytes kept
            axis = fig.layout["yaxis" + line.yaxis[1:]]
            ranges.add(tuple(axis.range))
            assert axis.showgrid is False
            # Its name beside its own panel, right of the plot.
            (label,) = [a for a in fig.layout.annotations if a.yref == f"{line.yaxis} domain"]
            assert label.text == line.name and label.x == 1 and label.xanchor == "left"
        assert len(ranges) == 1  # one scale: the stages' heights compare
        # The passes are counted once, under the last stage, on an axis every stage's panel follows.
        xaxes = [fig.layout["xaxis" + line.xaxis[1:]] for line in lines]
        assert [a.showticklabels for a in xaxes] == [False] * (stages - 1) + [True]
        assert all(a.matches == "x" for a in xaxes[1:])
        (title,) = [a for a in fig.layout.annotations if a.textangle == -90]
        assert title.text == f"activations kept ({unit.name})" and fig.layout.yaxis.title.text is None
        titles = [unwrap(a.text) for a in fig.layout.annotations if a.yref == "paper" and a.textangle != -90]
        assert titles == ["Activations kept for microbatches in flight, pass by pass"]
        assert not [t for t in fig.data if t.type == "bar"]  # what each stage holds: the chart under this one


@pytest.mark.parametrize("name", list(RUNS))
def test_what_each_stage_holds_is_a_chart_of_its_own_under_the_activations(name):
    """The view's second figure: each stage's parameters, gradients and optimizer state as the ranks measured them
    (facts "held"), stacked, in the unit of the activations' chart; the page draws it under the first."""
    from dpviz.figures.views import memory_then

    trace = run(name)
    fig = memory_then(trace, 0)
    assert fig is not None and unwrap(fig.layout.title.text) == "What each stage holds for the whole run"
    held, flight = trace.facts["held"], trace.facts["flight"]
    kinds = ("parameters", "gradients", "optimizer state")
    unit = byte_unit(max([row[3] for stage in flight for row in stage]
                         + [sum(h[k]["bytes"] for k in kinds) for h in held]))
    bars = [t for t in fig.data if t.type == "bar"]
    assert [b.name for b in bars] == list(kinds) and fig.layout.barmode == "stack"
    for bar in bars:
        assert list(bar.x) == [f"stage {s + 1}" for s in range(len(held))]
        assert [y * unit.size for y in bar.y] == pytest.approx([h[bar.name]["bytes"] for h in held])
    assert held_pipeline_figure(trace, 0) is not None


@pytest.mark.parametrize("presenting", [False, True], ids=["plain", "presenting"])
def test_the_stages_names_fit_the_right_margin(presenting):
    fig = memory_pipeline_figure(run("1f1b"), 0)
    fig = presentation(fig) if presenting else fig
    names = [a for a in fig.layout.annotations if (a.yref or "").endswith("domain")]
    assert len(names) == 4
    for name in names:
        assert name.xshift + text_px(name.text, name.font.size) <= fig.layout.margin.r


def test_the_stages_panels_leave_room_between_their_ticks():
    """A panel's 0 and the next panel's top tick, at Presenting's size, do not meet."""
    fig = presentation(memory_pipeline_figure(run("1f1b"), 0))
    lines = _lines(fig)
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    size = fig.layout.yaxis.tickfont.size
    for upper, lower in zip(lines, lines[1:]):
        gap_px = (_domain(fig, upper)[0] - _domain(fig, lower)[1]) * plot_px
        assert gap_px >= size * 1.3  # half a tick label above and half below


@pytest.mark.parametrize("name", list(RUNS))
def test_the_plan_keeps_as_many_microbatches_as_each_stage_of_the_run_held(name):
    """The plan of the run's own settings (dpviz.engines.plan): each stage keeps, at most, as many microbatches'
    activations as the run's stage held at once (GPipe every one, 1F1B min(M, S - s)), and holds what it held."""
    from dpviz.engines import ENGINES
    from dpviz.engines.plan import measure_catalogue

    trace, settings = run(name), RUNS[name]
    shape = measure_catalogue(settings["model"], rows=settings["batch_size"])
    planned = ENGINES["pipeline"].part("plan")(shape, settings["gpus"], trace.config.optimizer,
                                               schedule=settings["schedule"], microbatches=settings["microbatches"])
    held = [max(row[4] for row in rows) for rows in trace.facts["flight"]]
    assert [stage["microbatches kept"] for stage in planned] == held
    assert held == {"gpipe": [4, 4], "1f1b": [4, 3, 2, 1]}[name]
    for kind in ("parameters", "gradients", "optimizer state"):
        assert [stage[kind] for stage in planned] == [h[kind]["bytes"] for h in trace.facts["held"]], kind
