"""FSDP × TP's Mesh, read back from the real page: every rank's words lie inside its box at 800, 1024 and 1400 px and
with Presenting on at a projector's 1024 and wider (the box's rectangle and the words' own, getBoundingClientRect), and its hover names every
parameter the box leaves out.

    .venv/bin/python -m pytest tests/browser/test_browser_mesh.py -q -n 0
"""
from __future__ import annotations

import pytest

import waits
from test_browser import SVG
from test_browser_classroom import fresh
from test_browser_projector import present

pytestmark = pytest.mark.browser

LINK = "?engine=fsdp&tp=2&gpus=4&train=true"
WIDTHS = (800, 1024, 1400)
# Presenting is laid out for a projector's 1024 × 768 (its titles wrapped for that chart too): there and wider.
PRESENTING_WIDTHS = (1024, 1400)
SLACK_PX = 1  # anti-aliasing: a glyph's box may reach a pixel past the outline it sits in
RUN_TIMEOUT_MS = 240_000  # four ranks' processes on a busy machine

# The shown Mesh chart's rank boxes (the shapes) and the words on them (the annotations), in page pixels.
BOXES = r"""() => {
  const panel = document.querySelector('[data-testid=stTabPanel]:not([data-st-inactive])');
  const chart = panel.querySelector('.js-plotly-plot');
  const box = e => { const r = e.getBoundingClientRect(); return {x: r.x, y: r.y, r: r.right, b: r.bottom}; };
  return {shapes: [...chart.querySelectorAll('.shapelayer path')].map(box),
          words: [...chart.querySelectorAll('.annotation text.annotation-text')]
                   .filter(t => /^(rank \d|\d)/.test(t.textContent))  // a box's words, not notes under the plot
                   .map(t => ({...box(t), text: t.textContent}))};
}"""


def outside(found: dict) -> list[str]:
    """Each rank's words that run past the box they sit in (the box holding their centre), by how far."""
    problems = []
    for words in found["words"]:
        cx, cy = (words["x"] + words["r"]) / 2, (words["y"] + words["b"]) / 2
        home = [s for s in found["shapes"] if s["x"] <= cx <= s["r"] and s["y"] <= cy <= s["b"]]
        if not home:
            problems.append(f"{words['text'][:50]!r} in no box")
            continue
        s = home[0]
        past = max(s["x"] - words["x"], words["r"] - s["r"], s["y"] - words["y"], words["b"] - s["b"])
        if past > SLACK_PX:
            problems.append(f"{words['text'][:50]!r} runs {past:.0f} px past its box")
    return problems


def test_every_ranks_words_lie_inside_its_box_at_every_width_and_presenting(browser, app_url, artifacts):
    context, page = fresh(browser, app_url, {"width": WIDTHS[0], "height": 768})
    problems = []
    try:
        page.set_default_timeout(RUN_TIMEOUT_MS)
        waits.opened(page, f"/{LINK}")
        page.wait_for_selector(SVG)
        waits.tab_shown(page, "Mesh")
        for presenting in (False, True):
            if presenting:
                present(page)
                waits.tab_shown(page, "Mesh")
            for width in PRESENTING_WIDTHS if presenting else WIDTHS:
                waits.resized(page, width, 768)
                found = page.evaluate(BOXES)
                assert len(found["words"]) == 4 and len(found["shapes"]) == 4, found  # a box and its words per rank
                mine = outside(found)
                if mine:
                    page.screenshot(path=artifacts / f"mesh-{width}{'-presenting' if presenting else ''}.png")
                problems += [f"{width}{' presenting' if presenting else ''}: {p}" for p in mine]
        # what the boxes leave out, the hover says: every parameter a rank holds, by name
        hover = page.evaluate("""() => {
          const chart = document.querySelector('[data-testid=stTabPanel]:not([data-st-inactive]) .js-plotly-plot');
          const t = chart.data.find(d => d.hovertext); return t ? t.hovertext : null; }""")
        assert hover and all(name in hover[0] for name in ("net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias"))
    finally:
        context.close()
    assert not problems, "\n".join(problems)
