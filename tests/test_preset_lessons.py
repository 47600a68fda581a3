"""Every preset opens on its lesson: its link runs, opens on the tab its text names, its own run holds the claim beside
its text (dpviz.preset_claims) and the chart on that tab carries the claim's mark. Driven by AppTest, as a class
opens a preset's link. The pipeline's presets are held by tests/test_pipeline_*.py."""
from __future__ import annotations

import dataclasses
import json

import pytest

from dpviz import record
from dpviz.figures.text_fit import unwrap
from dpviz.presets import ALL_PRESETS, EVERY_ENGINE, LINK_PRESETS, PIPELINE_PRESETS
from test_app import page

LESSONS = [name for name in LINK_PRESETS if name not in PIPELINE_PRESETS]


def charts_text(app) -> str:
    """Every chart the page drew (only the open tab's view is drawn), as plotly's JSON with its words unescaped and
    unwrapped (a mark is the chart's words wherever a line of them breaks)."""
    return " ".join(unwrap(json.dumps(json.loads(chart.proto.spec), ensure_ascii=False))
                    for chart in app.get("plotly_chart"))


def run_of(app, config):
    """The page's own run of `config`, from the session's store (recorded already: get() records nothing again)."""
    runs = app.session_state["runs"]
    assert config in runs, "the page ran the preset's settings"
    return runs.get(config)


@pytest.mark.parametrize("name", LESSONS)
def test_a_preset_opens_on_its_lesson_and_its_run_holds_its_claim(name):
    preset = LINK_PRESETS[name]
    assert preset.claim is not None, f"{name} declares the claim its text makes"
    app = page(preset=name)
    assert not app.exception, name
    charts = app.get("plotly_chart")
    assert charts, "the opening tab draws its chart"
    if preset.opens not in (EVERY_ENGINE, "compare"):  # a page of several engines opens on its one chart
        assert app.session_state["tab"] in {view_tab for view_tab in _tabs_of(preset)}, app.session_state["tab"]
    if preset.pair is not None:  # a comparison of its own two engines: its claim reads both runs
        from dpviz.page.link import fit_pair

        assert tuple(app.session_state[key] for key in ("compare_first", "compare_second")) == preset.pair
        first, second = fit_pair(preset.config, preset.pair)[0]
        shown = preset.claim(run_of(app, second), run_of(app, first))
    else:
        shown = preset.claim(run_of(app, preset.config))
    assert shown.holds, f"{name}: {shown.said}"
    assert shown.mark in charts_text(app), f"{name}: the opening chart lacks {shown.mark!r}"


def _tabs_of(preset) -> set[str]:
    """The tab labels the preset's view may have (a view naming its unit per batch says per step under DDP)."""
    from dpviz.figures.views import VIEWS

    view = next(v for v in VIEWS if v.key == preset.opens)
    return {view.tab, view.tab.replace("per batch", "per step")}


def test_a_claim_fails_on_a_run_that_does_not_show_it():
    """A claim reads the run: the drop_last preset's claim on the same rows without drop_last (every row loaded, two
    padded) does not hold, and the batch-per-process claim on one step of 100 rows (its old settings) does not."""
    drop = ALL_PRESETS["ddp-drop-last"]
    padded = record(dataclasses.replace(drop.config, options=dataclasses.replace(drop.config.options, drop_last=False)))
    assert not drop.claim(padded).holds
    compared = LINK_PRESETS["compare-tp-fsdp"]  # read with its own runs swapped: FSDP is not the one that sends more
    from dpviz.page.link import fit_pair

    tp, fsdp = (record(config) for config in fit_pair(compared.config, compared.pair)[0])
    assert compared.claim(fsdp, tp).holds and not compared.claim(tp, fsdp).holds and not compared.claim(fsdp).holds
    per_process = ALL_PRESETS["ddp-batch-per-process"]
    one_step = record(dataclasses.replace(per_process.config, data_size=100))
    assert len(one_step.batches) == 1 and not per_process.claim(one_step).holds


def test_the_tp_fsdp_claim_counts_the_step_compare_reads():
    """The comparison's claim reads each run's bytes in the one whole step Compare's bars read (counted_step), not in
    its first: a TP run whose first step handed its all-reduces a quarter of the bytes (as a first step of fewer rows
    would) still shows, in the step Compare reads, that a TP rank sends more than an FSDP rank, in Compare's numbers."""
    from dpviz.analysis.traffic import counted_step, sent_per_step
    from dpviz.page.link import fit_pair

    compared = LINK_PRESETS["compare-tp-fsdp"]
    tp, fsdp = (record(config) for config in fit_pair(compared.config, compared.pair)[0])
    assert counted_step(tp) != 0
    moved = [[[step, kind, calls, size // 4 if step == 0 else size] for step, kind, calls, size in rank or []]
             for rank in tp.facts["moved"]]
    short_first = dataclasses.replace(tp, facts={**tp.facts, "moved": moved})
    assert max(sent_per_step(short_first)) == max(sent_per_step(tp))  # Compare reads the same step of both
    shown = compared.claim(fsdp, short_first)
    assert shown.holds, shown.said
    assert f"a TP rank sent {max(sent_per_step(tp)):,.0f} B, an FSDP rank {max(sent_per_step(fsdp)):,.0f} B" in shown.said
