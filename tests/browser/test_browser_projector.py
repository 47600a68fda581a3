"""The charts on a projector, measured in the real page: what Presenting makes larger never collides, and
what carries meaning stands out from the page's background in the light and the dark theme.

    .venv/bin/python -m pytest tests/browser/test_browser_projector.py -q

Boxes are the rendered text's own rectangles (getBoundingClientRect of each label plotly drew); colours
are read back from a screenshot's pixels (PIL), at points plotly's own axes map the figure's data to.
"""
from __future__ import annotations

import io
import re

import pytest

import waits
from test_browser import ACTIVE_PANEL, SVG, assert_no_exception, open_page
from test_browser_classroom import CONTRAST, PROJECTOR, fresh

pytestmark = pytest.mark.browser

PLOT = f"{ACTIVE_PANEL} .js-plotly-plot"
PRESENTING = "Presenting: larger text in the charts"
EIGHT_TRAINING = "?gpus=8&train=true"

# Each element's rectangle on the page, for a CSS selector inside the shown chart.
BOXES = """([plot, selector]) => [...document.querySelector(plot).querySelectorAll(selector)]
    .map(e => { const r = e.getBoundingClientRect();
                return {text: e.textContent, x: r.x, y: r.y, w: r.width, h: r.height}; })
    .filter(b => b.w > 0 && b.h > 0)"""


def present(page) -> None:
    """Turn the sidebar's Presenting toggle on and wait for the charts drawn at the larger size."""
    waits.rerun(page, lambda: page.get_by_role("switch", name=PRESENTING).click(force=True))


def shown_chart(page, tab: str) -> None:
    waits.tab_shown(page, tab)
    page.wait_for_selector(f"{ACTIVE_PANEL} {SVG}")


def boxes(page, selector: str) -> list[dict]:
    return page.evaluate(BOXES, [PLOT, selector])


def overlap(a: dict, b: dict, slack: float = 0.5) -> bool:
    return (a["x"] + slack < b["x"] + b["w"] and b["x"] + slack < a["x"] + a["w"]
            and a["y"] + slack < b["y"] + b["h"] and b["y"] + slack < a["y"] + a["h"])


def overlapping(labels: list[dict]) -> list[tuple[str, str]]:
    return [(a["text"], b["text"]) for i, a in enumerate(labels) for b in labels[i + 1:] if overlap(a, b)]


def test_presenting_at_1024_the_flows_gpu_labels_never_touch(browser, app_url):
    """'…parameters GPU 0 rows 0-1 (2 rows) GPU 1…' ran together at 1024 when presenting."""
    context, page = fresh(browser, app_url, PROJECTOR)
    try:
        open_page(page, EIGHT_TRAINING)
        present(page)
        shown_chart(page, "Flow")
        assert_no_exception(page)
        labels = boxes(page, ".yaxislayer-above .ytick text")
        assert len(labels) == 9, [b["text"] for b in labels]  # eight GPUs and GPU 0's parameters
        size = page.evaluate("s => parseFloat(getComputedStyle(document.querySelector(s)).fontSize)", f"{PLOT} .ytick text")
        assert size > 14 * 1.3  # presenting: the labels did grow
        assert overlapping(labels) == []
    finally:
        context.close()


def _memory_checks(page) -> None:
    """The legend off the grid, the bars and every column and step name; the caption inside the chart;
    no two column names on one another."""
    legend = boxes(page, ".legend .bg")
    assert len(legend) == 1
    marks = (boxes(page, ".heatmaplayer image") + boxes(page, ".barlayer .point path")
             + boxes(page, ".xtick text") + boxes(page, ".ytick text"))
    assert len(marks) > 20
    covered = [m["text"] or "a mark" for m in marks if overlap(legend[0], m)]
    assert covered == [], f"the legend covers {covered}"
    chart = boxes(page, ".main-svg")[0]
    for note in boxes(page, ".annotation-text-g text"):
        assert note["x"] >= chart["x"] - 0.5 and note["x"] + note["w"] <= chart["x"] + chart["w"] + 0.5, note
        assert note["y"] + note["h"] <= chart["y"] + chart["h"] + 0.5, note
    names = boxes(page, ".xtick text")  # under the grid and under the bars
    assert overlapping(names) == [], overlapping(names)


def test_presenting_at_1024_memorys_legend_and_note_stay_clear(browser, app_url):
    """The legend covered the 'SGD step' row and GPUs 0-6; its note was cut ('1.18 Ki', 'gradier')."""
    context, page = fresh(browser, app_url, PROJECTOR)
    try:
        open_page(page, EIGHT_TRAINING)
        present(page)
        shown_chart(page, "Memory")
        assert_no_exception(page)
        _memory_checks(page)
        note = " ".join(b["text"] for b in boxes(page, ".annotation-text-g text"))
        # The whole note is drawn, words uncut: every size ends in its unit ('1.18 Ki' was cut), 'gradients' whole.
        assert re.search(r"\d\s(B|KiB|MiB|GiB)\b", note) and not re.search(r"\d\s(K|M|G)i?(?!B)", note), note
        assert "gradients" in note and "gradier" not in note
    finally:
        context.close()


def test_memory_at_16_gpus_and_800_px_names_columns_apart(browser, app_url):
    """'1011121314' under sixteen bars at 800 px, and the legend on the grid."""
    context, page = fresh(browser, app_url, {"width": 800, "height": 700})
    try:
        open_page(page, "?gpus=16&train=true")
        shown_chart(page, "Memory")
        _memory_checks(page)
        names = [b["text"] for b in boxes(page, ".xtick text")]
        assert "0" in names and "14" in names  # GPU numbers are still written, every other one
    finally:
        context.close()


# Points, in page pixels, at the middle of the replicate lines where they leave GPU 0's parameters (above
# every other band) and at the middle of the batch's node, from the traces plotly drew and its axes.
MARK_POINTS = """plot => {
  const gd = document.querySelector(plot), full = gd._fullLayout, box = gd.getBoundingClientRect();
  const px = (x, y) => [box.x + full.xaxis._offset + full.xaxis.d2p(x), box.y + full.yaxis._offset + full.yaxis.d2p(y)];
  const points = {replicate: [], batch: []};
  for (const t of gd.data) {
    if (!t.meta) continue;
    const n = t.x.length;
    if (t.meta.kind === 'link' && t.meta.step === 'replicate') {
      const i = 1, j = n - 2 - i;  // the upper edge's second point and the lower edge's facing one
      points.replicate.push(px((t.x[i] + t.x[j]) / 2, (t.y[i] + t.y[j]) / 2));
    }
    if (t.meta.kind === 'node' && t.meta.step === 'scatter') {
      const xs = t.x.slice(0, 4), ys = t.y.slice(0, 4);
      points.batch.push(px((Math.min(...xs) + Math.max(...xs)) / 2, (Math.min(...ys) + Math.max(...ys)) / 2));
    }
  }
  const right = box.x + box.width - 4, middle = box.y + full._size.t + full._size.h / 2;
  return {marks: points, background: [right, middle]};
}"""


def _luminance(rgb) -> float:
    channels = [c / 255 for c in rgb[:3]]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _ratio(a, b) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_flow_marks_and_text_stand_out_from_the_page(browser, app_url, scheme):
    """Read from the screenshot's pixels: the replicate lines (1.5:1 on the dark theme, 2:1 on the light)
    and the batch's node (2:1 on dark) reach 3:1 against the background; every text off the marks 4.5:1."""
    from PIL import Image

    context, page = fresh(browser, app_url, {"width": 1400, "height": 900}, scheme=scheme)
    try:
        open_page(page, EIGHT_TRAINING)
        shown_chart(page, "Flow")
        plot = page.locator(PLOT).first
        plot.scroll_into_view_if_needed()
        waits.scrolled(page, PLOT)
        where = page.evaluate(MARK_POINTS, PLOT)
        shot = Image.open(io.BytesIO(page.screenshot())).convert("RGB")
        background = shot.getpixel(tuple(round(v) for v in where["background"]))
        page_colour = page.evaluate("getComputedStyle(document.querySelector('[data-testid=stApp]')).backgroundColor")
        assert list(background) == [int(v) for v in re.findall(r"\d+", page_colour)[:3]]  # the spot is bare page
        assert len(where["marks"]["replicate"]) >= 2 and len(where["marks"]["batch"]) == 1  # a copy per used GPU
        for kind, points in where["marks"].items():
            for x, y in points:
                assert 0 <= x < shot.width and 0 <= y < shot.height, (kind, x, y)
                pixel = shot.getpixel((round(x), round(y)))
                assert _ratio(pixel, background) >= 3, f"{kind} at {x:.0f},{y:.0f}: {pixel} on {background}"
        low = page.evaluate(CONTRAST)
        assert low == [], f"text under 4.5:1 on the {scheme} theme: {low}"
    finally:
        context.close()


@pytest.mark.parametrize("query,written", [("?gpus=8&batch_size=16", True), ("?gpus=8", False)])
def test_presenting_at_1024_the_sample_maps_numbers_are_readable_or_on_hover(browser, app_url, query, written):
    """The dataset row numbers were 6-8 px at 1024: now 12 px or more, one per cell and apart, or none
    where the cells are too narrow, and each cell's row in its hover."""
    context, page = fresh(browser, app_url, PROJECTOR)
    try:
        open_page(page, query)
        present(page)
        shown_chart(page, "Sample map")
        assert_no_exception(page)
        numbers = page.evaluate("""plot => [...document.querySelector(plot).querySelectorAll('.textpoint text')]
            .map(e => ({text: e.textContent, size: parseFloat(getComputedStyle(e).fontSize),
                        h: e.getBoundingClientRect().height, x: e.getBoundingClientRect().x,
                        y: e.getBoundingClientRect().y, w: e.getBoundingClientRect().width}))""", PLOT)
        if written:
            assert len(numbers) == 100
            assert min(n["size"] for n in numbers) >= 12 and min(n["h"] for n in numbers) >= 12
            assert overlapping(numbers) == []
        else:
            assert numbers == []
        # A cell's hover names its dataset row: the first row of the first batch's cell, brought on screen.
        page.locator(f"{PLOT} .subplot.x2y2").first.evaluate("e => e.scrollIntoView({block: 'center'})")
        waits.scrolled(page, f"{PLOT} .subplot.x2y2")
        cell = page.evaluate("""plot => {
            const gd = document.querySelector(plot), full = gd._fullLayout, box = gd.getBoundingClientRect();
            const heat = gd._fullData.find(t => t.type === 'heatmap' && t.xaxis === 'x2');
            return {x: box.x + full.xaxis2._offset + full.xaxis2.d2p(0), y: box.y + full.yaxis2._offset + full.yaxis2.d2p(1),
                    id: heat.customdata[0][0][0]};  // (its dataset row, its place in the batch from 1)
        }""", PLOT)
        page.mouse.move(cell["x"], cell["y"])
        hover = page.locator(f"{PLOT} .hoverlayer .hovertext")
        hover.first.wait_for()
        assert f"batch 1, row 1 of the batch: dataset row {cell['id']}" in hover.first.text_content()  # counted from 1
    finally:
        context.close()
