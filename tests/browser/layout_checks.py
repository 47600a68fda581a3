"""What a first screen must be, read back from the real page: its rendered text boxes and its pixels.

    problems = first_screen_problems(page)   # [] when the screen in the viewport is right; else one line each

Checked on what the viewport shows (the page scrolled to its top), in the charts plotly drew:
- no two texts overlap (each label's own rectangle, getBoundingClientRect);
- no number is split from its unit across two lines ("144" / "B"), and no text anywhere on the screen is cut
  mid-word ("iteratio…");
- every text reads on what is behind it: 4.5:1 between its fill and the commonest colour of the pixels of its box
  (the background as drawn: the page, a bar, a band);
- every line that carries meaning (a shape, an arrow, a trace's line) stands out 3:1 from what it crosses: along
  it, at points where the pixels on both sides are another colour, at least one side contrasts 3:1 with it;
- the first screen is not mostly blank: of the chart's part in the viewport, under its title, most bands hold ink;
- no chart's legend scrolls (plotly's scrollbar hides its last entries).
"""
from __future__ import annotations

import io
import re

import numpy as np

from dpviz.figures.colors import contrast_ratio

ACTIVE_PANEL = "[data-testid=stTabPanel]:not([data-st-inactive])"
TEXT_RATIO, MARK_RATIO = 4.5, 3.0
TOLERANCE = 0.15  # anti-aliased pixels read a little off the colour asked for
UNIT = re.compile(r"^(B|KiB|MiB|GiB|TiB|ms|s|%|×)\b")
CUT = re.compile(r"[A-Za-z]…")  # a word ended by an ellipsis: text cut mid-word
BLANK_BAND_PX, MOST_BLANK = 24, 0.6

# The shown charts' texts and meaningful lines in the viewport, with their boxes, colours and (for lines) points.
READ = r"""() => {
  const view = {w: window.innerWidth, h: window.innerHeight};
  const inside = r => r.width > 0 && r.height > 0 && r.bottom > 0 && r.top < view.h && r.right > 0 && r.left < view.w;
  const charts = [...document.querySelectorAll('.js-plotly-plot')].filter(c => {
    const panel = c.closest('[data-testid=stTabPanel]');
    return (!panel || !panel.hasAttribute('data-st-inactive')) && inside(c.getBoundingClientRect());
  });
  const texts = [], lines = [], plots = [];
  for (const chart of charts) {
    const box = chart.getBoundingClientRect();
    const title = chart.querySelector('.gtitle');
    const tb = title ? title.getBoundingClientRect() : null;
    plots.push({x: box.x, y: box.y, w: box.width, h: box.height, below: tb ? tb.bottom : box.y,
                // plotly draws a legend's scrollbar only where its entries run past the height it was given
                scrolls: [...chart.querySelectorAll('.legend rect.scrollbar')].some(r => +r.getAttribute('height') > 0)});
    for (const t of chart.querySelectorAll('text')) {
      if (t.closest('.hoverlayer, .modebar, .legendtoggle')) continue;
      const r = t.getBoundingClientRect();
      const words = (t.textContent || '').trim();
      if (!words || !inside(r)) continue;
      const style = getComputedStyle(t);
      if (style.visibility === 'hidden' || style.display === 'none' || parseFloat(style.opacity || '1') === 0) continue;
      const parts = [...t.querySelectorAll('tspan.line')].map(s => s.textContent);
      texts.push({text: words, lines: parts.length ? parts : [words], x: r.x, y: r.y, w: r.width, h: r.height,
                  fill: style.fill});
    }
    const marks = chart.querySelectorAll('.shapelayer path, .annotation-arrow-g path, .scatterlayer .js-line');
    for (const p of marks) {
      const style = getComputedStyle(p);
      const width = parseFloat(style.strokeWidth || '0');
      if (!p.getTotalLength || style.stroke === 'none' || width < 1.5 || parseFloat(style.strokeOpacity || '1') < 0.5) continue;
      const m = p.getScreenCTM(), length = p.getTotalLength();
      if (!m || length < 8) continue;
      const points = [];
      // Its middle: an arrow's path runs on under its head and to what it points at (plotly hides the ends with a
      // dash pattern), so its first and last fifth are where it meets its own head or its target, not a crossing.
      for (let i = 0; i <= 10; i++) {
        const at = length * (0.2 + 0.6 * i / 10);
        const a = p.getPointAtLength(at), b = p.getPointAtLength(Math.min(length, at + 1));
        const x = m.a * a.x + m.c * a.y + m.e, y = m.b * a.x + m.d * a.y + m.f;
        const bx = m.a * b.x + m.c * b.y + m.e, by = m.b * b.x + m.d * b.y + m.f;
        const len = Math.hypot(bx - x, by - y) || 1;
        points.push({x, y, nx: -(by - y) / len, ny: (bx - x) / len});
      }
      lines.push({stroke: style.stroke, width, points});
    }
  }
  const words = document.querySelector('[data-testid=stMain]')?.innerText || '';
  return {texts, lines, plots, words, view};
}"""


def _rgb(css: str) -> tuple[int, int, int] | None:
    numbers = re.findall(r"[\d.]+", css or "")
    if len(numbers) < 3 or (len(numbers) >= 4 and float(numbers[3]) == 0):
        return None
    return tuple(int(float(n)) for n in numbers[:3])


def _crop(pixels: np.ndarray, left: int, top: int, right: int, bottom: int) -> np.ndarray:
    """pixels[top:bottom, left:right] as Pillow's Image.crop gives it: black where the box leaves the screenshot."""
    box = np.zeros((bottom - top, right - left, 3), dtype=pixels.dtype)
    height, width = pixels.shape[:2]
    x0, y0, x1, y1 = max(left, 0), max(top, 0), min(right, width), min(bottom, height)
    if x1 > x0 and y1 > y0:
        box[y0 - top:y1 - top, x0 - left:x1 - left] = pixels[y0:y1, x0:x1]
    return box


def _commonest(pixels: np.ndarray) -> tuple[int, int, int]:
    """The commonest colour of `pixels`; of colours as common, the first in reading order (as Counter.most_common).
    Counted in numpy: a screenshot holds a million pixels, which a Python loop takes a second over."""
    packed = pixels.reshape(-1, 3).astype(np.int32)
    packed = packed[:, 0] << 16 | packed[:, 1] << 8 | packed[:, 2]
    colours, first, counts = np.unique(packed, return_index=True, return_counts=True)
    most = counts == counts.max()
    colour = int(colours[most][np.argmin(first[most])])
    return colour >> 16 & 255, colour >> 8 & 255, colour & 255


def _hex(rgb) -> str:
    return "#%02X%02X%02X" % tuple(rgb[:3])


def _overlap(a: dict, b: dict, slack: float = 1.5) -> bool:
    return (a["x"] + slack < b["x"] + b["w"] and b["x"] + slack < a["x"] + a["w"]
            and a["y"] + slack < b["y"] + b["h"] and b["y"] + slack < a["y"] + a["h"])


def _background(pixels: np.ndarray, box: dict, dpr: float) -> tuple[int, int, int] | None:
    """The commonest colour of the pixels in `box` (page pixels): what the text is drawn on."""
    height, width = pixels.shape[:2]
    left, top = max(0, int(box["x"] * dpr)), max(0, int(box["y"] * dpr))
    right, bottom = min(width, int((box["x"] + box["w"]) * dpr)), min(height, int((box["y"] + box["h"]) * dpr))
    if right - left < 2 or bottom - top < 2:
        return None
    return _commonest(pixels[top:bottom, left:right])


def _pixel(image, x: float, y: float, dpr: float):
    px, py = int(round(x * dpr)), int(round(y * dpr))
    if 0 <= px < image.width and 0 <= py < image.height:
        return image.getpixel((px, py))[:3]
    return None


def _near(a, b, within: int = 40) -> bool:
    return sum(abs(x - y) for x, y in zip(a, b)) <= within


def _blend(pixel, mark, back, within: int = 24) -> bool:
    """Whether `pixel` is `mark` laid over `back` at some opacity: the anti-aliased edge of the mark itself."""
    spans = [m - b for m, b in zip(mark, back)]
    shares = [(p - b) / s for p, b, s in zip(pixel, back, spans) if abs(s) > 24]
    if not shares:
        return _near(pixel, back, within)
    share = min(max(sum(shares) / len(shares), 0.0), 1.0)
    return _near(pixel, [b + share * s for b, s in zip(back, spans)], within)


def first_screen_problems(page) -> list[str]:
    """Every way the viewport's first screen falls short, one line each (see the module's docstring)."""
    from PIL import Image

    found = page.evaluate(READ)
    dpr = page.evaluate("window.devicePixelRatio") or 1
    image = Image.open(io.BytesIO(page.screenshot())).convert("RGB")
    pixels = np.asarray(image)
    problems: list[str] = []
    texts = found["texts"]
    for i, a in enumerate(texts):
        for b in texts[i + 1:]:
            if _overlap(a, b):
                problems.append(f"overlap: {a['text'][:40]!r} and {b['text'][:40]!r}")
    for t in texts:
        for line, after in zip(t["lines"], t["lines"][1:]):
            if re.search(r"\d$", line.strip()) and UNIT.match(after.strip()):
                problems.append(f"a number split from its unit: {line.strip()[-20:]!r} / {after.strip()[:10]!r}")
        fill = _rgb(t["fill"])
        back = _background(pixels, t, dpr)
        if fill is not None and back is not None:
            ratio = contrast_ratio(_hex(fill), _hex(back))
            if ratio < TEXT_RATIO - TOLERANCE:
                problems.append(f"text at {ratio:.1f}:1: {t['text'][:40]!r} ({_hex(fill)} on {_hex(back)})")
    for cut in CUT.finditer(found["words"] + " " + " ".join(t["text"] for t in texts)):
        problems.append(f"cut mid-word: {cut.group(0)!r}")
    page_back = _commonest(pixels)  # the page's own background: most of any screen
    for line in found["lines"]:
        stroke = _rgb(line["stroke"])
        if stroke is None or _near(stroke, page_back):
            continue  # none, or a stroke of the page's own colour: a gap cut under a line (a halo), nothing to see
        offset = line["width"] / 2 + 2
        for p in line["points"]:
            here = _pixel(image, p["x"], p["y"], dpr)
            if here is not None and not (_near(here, stroke) or _blend(here, stroke, page_back)):
                continue  # covered here by a mark drawn over it (an arrow crossing it, through its gap): not shown
            sides = [_pixel(image, p["x"] + s * offset * p["nx"], p["y"] + s * offset * p["ny"], dpr) for s in (-1, 1)]
            sides = [c for c in sides if c is not None and not _near(c, stroke)
                     and not _blend(c, stroke, page_back)]
            if len(sides) < 2:
                continue  # beside itself (an arrowhead, its own bar) or at the screen's edge
            if max(contrast_ratio(_hex(stroke), _hex(c)) for c in sides) < MARK_RATIO - TOLERANCE:
                problems.append(f"a line {_hex(stroke)} lost on {_hex(sides[0])} at ({p['x']:.0f}, {p['y']:.0f})")
                break
    for plot in found["plots"]:
        if plot["scrolls"]:
            problems.append("a legend scrolls: the colours it names last are out of sight")
        top, bottom = int(plot["below"]), int(min(plot["y"] + plot["h"], found["view"]["h"]))
        bands = [(y, min(y + BLANK_BAND_PX, bottom)) for y in range(top, bottom - BLANK_BAND_PX // 2, BLANK_BAND_PX)]
        if len(bands) < 4:
            continue
        blank = 0
        for y0, y1 in bands:
            crop = _crop(pixels, int(plot["x"] * dpr), int(y0 * dpr), int((plot["x"] + plot["w"]) * dpr), int(y1 * dpr))
            inked = np.count_nonzero(np.abs(crop.astype(np.int16) - page_back).sum(axis=2) > 24)  # not _near(·, 24)
            blank += inked < 0.01 * crop.shape[1] * crop.shape[0]
        if blank > MOST_BLANK * len(bands):
            problems.append(f"mostly blank: {blank} of {len(bands)} bands of the chart under its title hold no ink")
    return problems
