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
    # FSDP sends 1.5 times what DDP sends (computed), and holds half its parameters on each of 2 ranks
    assert diamonds["y"][6] == pytest.approx(1.5 * diamonds["y"][2])
    assert bars["parameters"]["y"][6] < bars["parameters"]["y"][2]
    assert "sent per step (computed)" in legend(page, "memory_chart")
    assert "1.5× DDP's" in page.locator("[data-testid=stMarkdown]").all_inner_texts()[-1]
    screenshot_full_page(page, artifacts / "memory-every-engine.png")
