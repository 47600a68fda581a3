"""Reading DistributedDataParallel's views on a projector, checked in the real page in headless Chromium.

    .venv/bin/python -m pytest tests/browser/test_browser_ddp_reading.py -q

DDP's Flow names its columns over its nodes and each rank on its band at 1024 and 1400 px; its Timeline's
step names never meet, in the usual type and under Presenting; its Tutorial log opens each step before
that step's rank lines. DataParallel's measured Timeline beside it: its lanes' names grow under
Presenting like the rest of the chart, and a cut of its time axis is marked once, on the axis.
Positions are read from what Chromium drew (bounding boxes, computed font sizes), not from the figure.
"""
from __future__ import annotations

import re

import pytest

import waits
from test_browser import ACTIVE_PANEL, assert_no_exception, open_page, show_tab

pytestmark = pytest.mark.browser

DDP = "?engine=ddp&gpus=4&train=true"
COLUMNS = {"dataset", "its ownrows", "forward,loss,backward", "all-reduce(mean)", "optimizerstep"}  # as textContent joins lines

BOXES = """([root, selector]) => [...document.querySelectorAll(root + ' ' + selector)].map(e => {
    const r = e.getBoundingClientRect();
    return {text: e.closest('g.annotation')?.textContent ?? e.textContent, x: r.x, y: r.y, w: r.width, h: r.height};
})"""


def fresh(browser, app_url, width: int, height: int = 768):
    context = waits.watched(browser.new_context(viewport={"width": width, "height": height}, base_url=app_url))
    page = context.new_page()
    page.set_default_timeout(180_000)  # a DDP run starts its processes first
    return context, page


def drawn(page, tab: str, key: str) -> str:
    """Show `tab`, wait for its chart (widget key `key`) to be drawn; the chart's selector."""
    waits.tab_shown(page, tab)  # One step is the first tab; Flow the second
    root = f"{ACTIVE_PANEL} .st-key-{key}"
    page.wait_for_selector(f"{root} .main-svg")
    return root


def boxes(page, root: str, selector: str) -> list[dict]:
    return [b for b in page.evaluate(BOXES, [root, selector]) if b["w"] > 0 and b["h"] > 0]


def meet(a: dict, b: dict, gap: float = 0.0) -> bool:
    return (a["x"] < b["x"] + b["w"] + gap and b["x"] < a["x"] + a["w"] + gap
            and a["y"] < b["y"] + b["h"] + gap and b["y"] < a["y"] + a["h"] + gap)


def presenting(page) -> None:
    waits.rerun(page, lambda: page.get_by_role("switch", name=re.compile("Presenting")).click(force=True))


@pytest.mark.parametrize("width", [1024, 1400])
def test_ddp_flow_names_its_columns_over_the_nodes_and_each_rank_on_its_band(browser, app_url, width):
    context, page = fresh(browser, app_url, width)
    try:
        open_page(page, DDP)
        assert_no_exception(page)
        for look in ("usual", "presenting"):
            if look == "presenting":
                presenting(page)
            root = drawn(page, "Flow", "flow")
            nodes = boxes(page, root, ".node-rect")
            texts = boxes(page, root, "g.annotation text")
            names = [t for t in texts if t["text"] in COLUMNS]
            tags = [t for t in texts if t["text"].startswith("rank ")]  # "rank 0" over "8 rows"
            assert {t["text"] for t in names} == COLUMNS and len(tags) == 4 and len(nodes) == 14, (look, texts)
            for text in names + tags:
                hidden = [n for n in nodes if meet(text, n)]
                assert not hidden, (look, text, hidden)  # no name behind (or over) a node
            top = min(n["y"] for n in nodes)
            assert all(t["y"] + t["h"] <= top for t in names), look  # the columns' names over every node
            computes = sorted({round(n["x"]) for n in nodes})[2]  # the third column: each rank's forward and backward
            assert all(t["x"] + t["w"] < computes for t in tags), look  # a rank's name fits on its band
    finally:
        context.close()


def test_ddp_timeline_step_names_never_meet_and_the_log_opens_each_step(browser, app_url):
    context, page = fresh(browser, app_url, 1024)
    try:
        open_page(page, DDP)
        log = show_tab(page, "Tutorial log").locator("[data-testid=stCode]")
        log.wait_for()
        lines = log.inner_text().splitlines()[1:]
        opening = [i for i, line in enumerate(lines) if line.startswith("Step ")]
        assert [lines[i].split(":")[0] for i in opening] == [f"Step {k} of {len(opening)}" for k in range(1, len(opening) + 1)]
        assert opening[0] == 0 and all(lines[i + 1].startswith("rank ") for i in opening)  # its ranks after it
        for look in ("usual", "presenting"):
            if look == "presenting":
                presenting(page)
            root = drawn(page, "Timeline", "timeline")
            steps = [b for b in boxes(page, root, "g.annotation text") if re.fullmatch(r"(step )?\d+(: .*)?", b["text"])]
            # Every step named, from 1: "step 1", "step 2", ... or, where they crowd, "step 1", "2", ...; a name that
            # would still meet its neighbour is left out (its dotted line marks the step), only once the names are
            # numbers alone: how crowded the steps are depends on the live run's measured times.
            numbers = [int(re.match(r"(?:step )?(\d+)", b["text"]).group(1)) for b in steps]
            assert steps[0]["text"].startswith("step 1") and numbers == sorted(set(numbers)), (look, numbers)
            assert set(numbers) <= set(range(1, len(opening) + 1)), (look, numbers)
            if len(numbers) < len(opening):
                assert len(numbers) >= len(opening) // 2 and not any(b["text"].startswith("step") for b in steps[1:]), \
                    (look, numbers)
            for i, a in enumerate(steps):
                for b in steps[i + 1:]:
                    assert not meet(a, b), (look, a, b)
            words = page.evaluate("root => [...document.querySelectorAll(root + ' .main-svg')].map(e => e.textContent).join('')",
                                  root)
            assert "all-reduceduringbackward'scompute" in re.sub(r"\s", "", words), look  # what its share measures
        assert_no_exception(page)
    finally:
        context.close()


def test_dataparallel_measured_lanes_grow_under_presenting_and_a_cut_sits_on_the_axis(browser, app_url):
    context, page = fresh(browser, app_url, 1024)
    try:
        open_page(page, "?gpus=8&train=true")
        sizes = {}
        for look in ("usual", "presenting"):
            if look == "presenting":
                presenting(page)
            root = drawn(page, "Timeline", "timeline")
            sizes[look] = page.evaluate("""root => ['.subplot.xy .ytick text', '.subplot.x2y2 .y2tick text'].map(s =>
                parseFloat(getComputedStyle(document.querySelector(root + ' ' + s)).fontSize))""", root)
            # The measured panel's bottom edge, where its time axis runs: the foot of its vertical grid lines.
            axis = page.evaluate("""root => { const r = document.querySelector(root + ' .subplot.x2y2 .gridlayer')
                .getBoundingClientRect(); return r.y + r.height; }""", root)
            for cut in [b for b in boxes(page, root, "g.annotation text") if b["text"] == "//"]:
                assert abs(cut["y"] + cut["h"] / 2 - axis) <= cut["h"], (cut, axis)  # on the time axis, not the lanes
        steps_usual, measured_usual = sizes["usual"]
        steps_shown, measured_shown = sizes["presenting"]
        assert measured_usual == steps_usual  # the measured lanes as large as the steps panel's
        assert measured_shown >= measured_usual * 1.3 and measured_shown == steps_shown, sizes
        assert_no_exception(page)
    finally:
        context.close()
