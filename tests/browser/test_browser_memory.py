"""The page "Memory, every engine" in headless Chromium: a link with engine=memory runs DataParallel, DDP, ZeRO-1
and FSDP at the same settings and plotly.js draws the two panels, every engine's devices on one axis, the
computed bytes as diamonds, and the reading under the chart."""
from __future__ import annotations

import pytest

from test_browser import IDLE, assert_no_exception, chart_traces, legend, screenshot_full_page

pytestmark = pytest.mark.browser

LINK = "/?engine=memory&gpus=2&train=true&optimizer=adam&model=mlp&input_size=64&batch_size=32&data_size=96"


def test_a_memory_link_draws_every_engines_memory_and_bytes(page, artifacts):
    page.goto(LINK)
    page.wait_for_selector(".st-key-memory_chart .js-plotly-plot .main-svg, [data-testid=stException]")
    page.wait_for_selector(IDLE)
    assert_no_exception(page)
    traces = chart_traces(page, "memory_chart")
    bars = {t["name"]: t for t in traces if t["type"] == "bar"}
    assert {"parameters", "gradients", "optimizer state", "all-reduce", "broadcast", "reduce-scatter"} <= set(bars)
    engines = bars["parameters"]["x"][0]
    assert engines == ["DataParallel"] * 2 + ["DDP"] * 2 + ["ZeRO-1"] * 2 + ["FSDP"] * 2
    diamonds = next(t for t in traces if t["type"] == "scatter")
    assert len(diamonds["y"]) == 8 and all(y > 0 for y in diamonds["y"])
    # FSDP sends 1.5 times what a DDP rank sends of its gradients (computed): DDP's rank 1, as rank 0 also broadcasts
    # the BatchNorm buffers before each forward; and FSDP holds half its parameters on each of 2 ranks
    assert diamonds["y"][6] == pytest.approx(1.5 * diamonds["y"][3])
    assert diamonds["y"][2] > diamonds["y"][3]
    assert bars["parameters"]["y"][6] < bars["parameters"]["y"][2]
    assert "sent per step (computed)" in legend(page, "memory_chart")
    readings = page.locator("[data-testid=stMarkdown]").all_inner_texts()
    assert any("1.5× DDP's" in text and text.startswith("Parameters, gradients and optimizer state") for text in readings)
    assert any(text.startswith("The same rules at toy size.") for text in readings)  # then the plan at real size
    screenshot_full_page(page, artifacts / "memory-every-engine.png")


def test_at_1024_with_four_devices_each_no_column_name_runs_into_the_panel_below(browser, app_url):
    """Sixteen 'rank 0'-style names stood on end and ran into the bytes panel's title at 1024 px; the engines'
    names under them must clear it too."""
    from test_browser_projector import BOXES, overlap

    context = browser.new_context(viewport={"width": 1024, "height": 768}, base_url=app_url)
    page = context.new_page()
    try:
        page.set_default_timeout(180_000)  # three engines start their processes in turn on a busy machine
        page.goto(LINK.replace("gpus=2", "gpus=4"))
        page.wait_for_selector(".st-key-memory_chart .js-plotly-plot .main-svg, [data-testid=stException]")
        page.wait_for_selector(IDLE)
        assert_no_exception(page)
        plot = ".st-key-memory_chart .js-plotly-plot"
        names = page.evaluate(BOXES, [plot, ".xaxislayer-above text"])  # devices' numbers and engines' names
        titles = page.evaluate(BOXES, [plot, ".annotation-text-g text"])
        assert len(names) >= 16 and titles
        assert [(n["text"], t["text"]) for n in names for t in titles if overlap(n, t)] == []
        assert [(a["text"], b["text"]) for i, a in enumerate(names) for b in names[i + 1:] if overlap(a, b)] == []
    finally:
        context.close()
