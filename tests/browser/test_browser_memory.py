"""The page "Memory, every engine" in headless Chromium: a link with engine=memory runs DataParallel, DDP, ZeRO-1
and FSDP at the same settings and plotly.js draws memory by kind, every engine's devices on one axis, the reading
under it, then the bytes per step in a chart of their own, the computed bytes as diamonds."""
from __future__ import annotations

import pytest

import waits
from test_browser import IDLE, assert_no_exception, chart_traces, legend, screenshot_full_page

pytestmark = pytest.mark.browser

LINK = "/?engine=memory&gpus=2&train=true&optimizer=adam&model=mlp&input_size=64&batch_size=32&data_size=96"


def test_a_memory_link_draws_every_engines_memory_and_bytes(page, artifacts):
    page.goto(LINK)
    page.wait_for_selector(".st-key-memory_chart .js-plotly-plot .main-svg, [data-testid=stException]")
    page.wait_for_selector(IDLE)
    assert_no_exception(page)
    page.wait_for_selector(".st-key-memory_bytes_chart .js-plotly-plot .main-svg")
    bars = {t["name"]: t for t in chart_traces(page, "memory_chart") if t["type"] == "bar"}
    assert {"parameters", "gradients", "optimizer state"} <= set(bars) and "all-reduce" not in bars
    traces = chart_traces(page, "memory_bytes_chart")
    moved = {t["name"]: t for t in traces if t["type"] == "bar"}
    assert {"all-reduce", "broadcast", "reduce-scatter"} <= set(moved) and "parameters" not in moved
    engines = bars["parameters"]["x"][0]
    assert engines == ["DataParallel"] * 2 + ["DDP"] * 2 + ["ZeRO-1"] * 2 + ["FSDP"] * 2
    assert moved["all-reduce"]["x"][0] == engines  # the same devices in the same order
    diamonds = next(t for t in traces if t["type"] == "scatter")
    assert len(diamonds["y"]) == 8 and all(y > 0 for y in diamonds["y"])
    # FSDP sends 1.5 times what a DDP rank sends of its gradients (computed): DDP's rank 1, as rank 0 also broadcasts
    # the BatchNorm buffers before each forward; and FSDP holds half its parameters on each of 2 ranks
    assert diamonds["y"][6] == pytest.approx(1.5 * diamonds["y"][3])
    assert diamonds["y"][2] > diamonds["y"][3]
    assert bars["parameters"]["y"][6] < bars["parameters"]["y"][2]
    assert "sent per step (computed)" in legend(page, "memory_bytes_chart")
    assert "sent per step (computed)" not in legend(page, "memory_chart") and "optimizer state" in legend(page, "memory_chart")
    readings = page.locator("[data-testid=stMarkdown]").all_inner_texts()
    assert any("1.5× DDP's" in text and text.startswith("Parameters, gradients and optimizer state") for text in readings)
    assert any(text.startswith("The same rules at toy size.") for text in readings)  # then the plan at real size
    screenshot_full_page(page, artifacts / "memory-every-engine.png")


def test_at_1024_with_four_devices_each_no_column_name_runs_into_another_or_the_legend(browser, app_url):
    """Sixteen 'rank 0'-style names stood on end and ran into the bytes panel's title at 1024 px; the engines'
    names under the devices' numbers must clear the legend of kinds hung under them, in both charts."""
    from test_browser_projector import BOXES, overlap

    context = browser.new_context(viewport={"width": 1024, "height": 768}, base_url=app_url)
    page = context.new_page()
    try:
        page.set_default_timeout(180_000)  # three engines start their processes in turn on a busy machine
        page.goto(LINK.replace("gpus=2", "gpus=4"))
        page.wait_for_selector(".st-key-memory_chart .js-plotly-plot .main-svg, [data-testid=stException]")
        page.wait_for_selector(IDLE)
        assert_no_exception(page)
        page.wait_for_selector(".st-key-memory_bytes_chart .js-plotly-plot .main-svg")
        for key in ("memory_chart", "memory_bytes_chart"):
            plot = f".st-key-{key} .js-plotly-plot"
            names = page.evaluate(BOXES, [plot, ".xaxislayer-above text"])  # devices' numbers and engines' names
            entries = page.evaluate(BOXES, [plot, ".legendtext"])
            assert len(names) >= 16 and entries, key
            assert [(n["text"], t["text"]) for n in names for t in entries if overlap(n, t)] == [], key
            assert [(a["text"], b["text"]) for i, a in enumerate(names) for b in names[i + 1:] if overlap(a, b)] == [], key
    finally:
        context.close()


# From the chart's title down to its plot: every stretch no text or legend covers. A legend's room kept for the
# narrowest chart's rows left a band of ~140 px over the legend of a wider chart (DataParallel, 1024 px).
BANDS = """(plot) => {
  const chart = document.querySelector(plot);
  const box = e => e.getBoundingClientRect();
  const top = Math.min(...[...chart.querySelectorAll('.nsewdrag')].map(e => box(e).top));
  const covered = [...chart.querySelectorAll('.infolayer .gtitle, .infolayer .gtitle-subtitle, .infolayer g[class^=legend] .legendtext, .infolayer g[class^=legend] .legendtitletext, .infolayer g[class^=legend] .legendpoints')]
    .map(box).filter(r => r.height > 0 && r.top < top).map(r => [r.top, Math.min(r.bottom, top)]).sort((a, b) => a[0] - b[0]);
  let reached = covered.length ? covered[0][1] : top, widest = 0;
  for (const [a, b] of covered) { widest = Math.max(widest, a - reached); reached = Math.max(reached, b); }
  return {widest: Math.max(widest, top - reached), top: top};
}"""


@pytest.mark.parametrize("width, presenting", [(1024, False), (1024, True), (800, False), (800, True)])
def test_dataparallels_memory_has_no_empty_band_over_its_plot(browser, app_url, width, presenting):
    from dpviz.figures.sizes import GAP_PX, LEGEND_ROW_PX
    from test_browser import ACTIVE_PANEL
    from test_browser_projector import present

    context = waits.watched(browser.new_context(viewport={"width": width, "height": 768}, base_url=app_url))
    page = context.new_page()
    try:
        page.set_default_timeout(120_000)
        waits.opened(page, "/?gpus=4&train=true")
        if presenting:
            present(page)
        waits.tab_shown(page, "Memory")
        page.wait_for_selector(f"{ACTIVE_PANEL} .js-plotly-plot .main-svg")
        found = page.evaluate(BANDS, f"{ACTIVE_PANEL} .js-plotly-plot")
        # the house gap under the title block, and less than a legend's row of slack, at Presenting's larger type too
        scale = 1.35 if presenting else 1
        assert found["widest"] < (GAP_PX + LEGEND_ROW_PX) * scale, found
        if not (presenting and width < 1024):  # Presenting lays a chart out for a projector's 1024 px
            from layout_checks import first_screen_problems

            assert first_screen_problems(page) == []  # the legend's columns run into nothing, and read
    finally:
        context.close()
