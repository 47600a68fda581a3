"""One step on the real page in headless Chromium: every engine opens on it, and flipping the engine on the same
link keeps its columns where they were, with the moves that engine makes drawn as arrows with their bytes."""
from __future__ import annotations

import re

import pytest

from dpviz.engines import ENGINES as SPECS
from test_browser import ACTIVE_PANEL, IDLE, SVG, assert_no_exception, screenshot_full_page

pytestmark = pytest.mark.browser

COLUMNS = ["Input", "Forward", "Backward", "Optimizer"]
# The engine radio's label, the lanes' noun, and the moves the column headings name (dpviz.analysis.one_step).
ENGINES = [
    ("dp", "GPU", {"scatter", "replicate", "gather", "output grad", "grad sum"}),
    ("ddp", "rank", {"buffers", "all-reduce"}),
    ("zero1", "rank", {"buffers", "all-reduce", "broadcast"}),
    ("fsdp", "rank", {"all-gather", "reduce-scatter"}),
    ("pipeline", "stage", {"activations", "gradients"}),
]
BYTES = re.compile(r"■ [\d,.]+ (B|KiB|MiB)")  # a box's line of bytes, after its move's swatch


def _chart(page):
    page.wait_for_selector(IDLE)
    panel = page.locator(ACTIVE_PANEL)
    panel.locator(SVG).first.wait_for()
    assert page.locator("[role=tab][aria-selected=true]").inner_text() == "One step"
    return panel.locator("[data-testid=stPlotlyChart]").first


def test_flipping_the_engine_keeps_one_steps_columns_and_draws_each_engines_moves(page, artifacts):
    page.goto("/?engine=dp&gpus=4&train=true&model=mlp&data_size=128&batch_size=32")
    where = None
    for name, noun, moves in ENGINES:
        label = SPECS[name].label
        if name != "dp":
            page.locator("[data-testid=stSidebar] [data-testid=stRadio]").first.get_by_text(label, exact=True).click()
        # The engine's own page: its heading, then its chart drawn.
        page.wait_for_function("title => [...document.querySelectorAll('[data-testid=stHeading]')].some(h => h.innerText.includes(title))",
                               arg=SPECS[name].title, timeout=180_000)
        chart = _chart(page)
        assert_no_exception(page)
        texts = chart.locator("g.annotation").all_text_contents()
        headings = [t for t in texts if any(t.startswith(c) for c in COLUMNS)]
        assert [next(c for c in COLUMNS if h.startswith(c)) for h in headings] == COLUMNS, (label, headings)
        # a name may break over two lines where a column is narrow ("output" over "grads"): read without the spaces
        named = {m for h in headings for m in moves if m.replace(" ", "") in h.replace(" ", "")}
        assert named == moves, (label, headings)
        # Where the headings sit: the same pixels under every engine.
        boxes = [chart.locator("g.annotation", has_text=c).first.bounding_box() for c in COLUMNS]
        centres = [round(b["x"] + b["width"] / 2) for b in boxes]
        if where is None:
            where = centres
        assert all(abs(a - b) <= 2 for a, b in zip(centres, where)), (label, centres, where)
        # Arrows, not the gaps of the page's colour cut under them where they cross another move's bar (halos: the
        # page's background, white on this light page).
        arrows = chart.locator("g.annotation-arrow-g").evaluate_all(
            "gs => gs.filter(g => { const p = g.querySelector('path');"
            " return p && getComputedStyle(p).stroke !== 'rgb(255, 255, 255)'; }).length")
        sizes = [m.group(0) for t in texts for m in BYTES.finditer(t)]
        # Bytes where every arrow ends: one per device a collective or a copy involves, two per send between stages.
        assert arrows > 0 and len(sizes) >= arrows, (label, arrows, sizes)
        ticks = chart.locator(".ytick text").all_text_contents()
        assert ticks == [f"{noun} {i + (1 if noun == 'stage' else 0)}" for i in range(4)], (label, ticks)
        screenshot_full_page(page, artifacts / f"one-step-{noun}-{label.lower()}.png")
