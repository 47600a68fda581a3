"""Words in boxes sized to hold them (One step's: an annotation named CELL_NOTE per box, each a rectangle around its
note), fitted to the lines a box holds: its lines as written where they fit, else joined into fewer lines as wide as
the box ("30 rows, keeps 4", "■ 336 B ■ 208 B"), else its brief words joined so (every number kept, fewer words:
"fwd 4, gathers 30"), and only where even those do not fit its joined lines cut to the lines it holds, its last one
MORE. A box that shows less than its whole lines has them in a hover over it. The type keeps its size: Presenting
never makes text smaller.

The figure keeps every box's whole and brief lines in its layout's meta (CELL_LINES), so that presentation() fits them
again to its own boxes, larger or smaller than the plain figure's:

    fitted(whole, brief, held=2, width_px=106, size=12)   # (lines shown, whether they say everything)
    fit_box_notes(fig, plot_px=330, width_px=580)          # each box of a plot 330 x 580 px fitted so
"""
from __future__ import annotations

import re

import plotly.graph_objects as go

from dpviz.figures.sizes import LINE_EM
from dpviz.figures.text_fit import text_px

CELL_NOTE = "cell"  # the name of an annotation of words in a box sized to hold them: it keeps its size
CELL_LINES = "cell_lines"  # the key, in the layout's meta, of every box's [whole lines, brief lines] by box_key
MORE = "[…]"  # the last line a box has room for, where it had more (the hover gives them all): bracketed, never
# read as a word cut mid-way ("s…") where the lines before it end
LEAST_LINES = 1  # a box keeps at least one line
PAD_PX = 4  # a box's room above and below its lines, the least
SIDE_PX = 2  # a box's room each side of its widest line
SWATCH = "■"  # a move's bytes start with its kind's swatch: such lines join each other, words join words


def box_key(x: float, y: float) -> str:
    """The key of the box whose note sits at (x, y), in the meta's CELL_LINES."""
    return f"{x:g},{y:g}"


def plain(line: str) -> str:
    """A line without its markup (a swatch's colour)."""
    return re.sub(r"<[^>]+>", "", line)


def _joined(first: str, second: str) -> str:
    """Two lines as one: words after words with a comma ('30 rows, keeps 4'), a continuation ('× 3', 'on 48 B') or a
    move's bytes after a space."""
    if SWATCH in plain(second) or second.startswith(("×", "on ")):
        return f"{first} {second}"
    return f"{first}, {second}"


def _packed_run(lines: list[str], width_px: float, size: float) -> list[str]:
    out: list[str] = []
    for line in lines:
        if out and text_px(plain(_joined(out[-1], line)), size) <= width_px:
            out[-1] = _joined(out[-1], line)
        else:
            out.append(line)
    return out


def packed(lines: list[str], width_px: float, size: float) -> list[str]:
    """`lines` joined into as few as fit `width_px` at `size`, in order: the words with the words and a move's bytes
    with the bytes (each its own line under the words), and only where that is still more lines, across them."""
    words = [line for line in lines if SWATCH not in plain(line)]
    swatches = [line for line in lines if SWATCH in plain(line)]
    if lines != words + swatches:  # words after bytes: kept in their order
        return _packed_run(lines, width_px, size)
    apart = _packed_run(words, width_px, size) + _packed_run(swatches, width_px, size)
    across = _packed_run(lines, width_px, size)
    return across if len(across) < len(apart) else apart


def _fits(lines: list[str], held: int, width_px: float, size: float) -> bool:
    return len(lines) <= held and all(text_px(plain(line), size) <= width_px for line in lines)


def fitted(whole: list[str], brief: list[str], held: int, width_px: float, size: float) -> tuple[list[str], bool]:
    """The lines a box `held` lines high and `width_px` wide shows at `size`, and whether they say all its whole lines
    say: the whole lines as written, else joined (packed), else its brief ones joined, else the whole ones joined
    cut to `held` lines, the last MORE (one line: the first, MORE after it where it fits)."""
    if _fits(whole, held, width_px, size):
        return whole, True
    joined = packed(whole, width_px, size)
    if _fits(joined, held, width_px, size):
        return joined, True
    short = packed(brief, width_px, size)
    if _fits(short, held, width_px, size):
        return short, False
    # cut: the lines as written (joined), the brief words being for a box that holds them all
    if held < 2:  # one line: the first, and MORE after it where the box is wide enough
        first = f"{joined[0]} {MORE}"
        return [first if text_px(plain(first), size) <= width_px else joined[0]], False
    return joined[:held - 1] + [MORE], False


def _box(fig: go.Figure, note) -> tuple[float, float] | None:
    """The (width, height) of the rectangle drawn around `note`, as shares of the x and y axes' spans (None: none
    is)."""
    xaxis, yaxis = fig.layout.xaxis, fig.layout.yaxis
    if yaxis.range is None or xaxis.range is None:
        return None
    xspan = abs(float(xaxis.range[1]) - float(xaxis.range[0])) or 1.0
    yspan = abs(float(yaxis.range[1]) - float(yaxis.range[0])) or 1.0
    for shape in fig.layout.shapes:
        if (shape.type == "rect" and shape.xref in (None, "x") and shape.yref in (None, "y")
                and min(shape.x0, shape.x1) <= note.x <= max(shape.x0, shape.x1)
                and min(shape.y0, shape.y1) <= note.y <= max(shape.y0, shape.y1)):
            return abs(shape.x1 - shape.x0) / xspan, abs(shape.y1 - shape.y0) / yspan
    return None


def lines_held(box_px: float, size: float) -> int:
    """The lines of `size` px type a box `box_px` high holds, at least LEAST_LINES."""
    return max(LEAST_LINES, int((box_px - PAD_PX) // (size * LINE_EM)))


def fit_box_notes(fig: go.Figure, plot_px: float, width_px: float) -> None:
    """Each CELL_NOTE of `fig` fitted (fitted()) to its box on a plot `plot_px` high and `width_px` wide (the boxes
    drawn in data coordinates of its axes), from the lines the layout's meta keeps; the whole lines of a box that shows
    less in a hover over it."""
    kept = (fig.layout.meta or {}).get(CELL_LINES, {}) if isinstance(fig.layout.meta, dict) else {}
    hovered = {(x, y) for t in fig.data if t.hovertext is not None for x, y in zip(t.x, t.y)}  # the figure's own
    xs, ys, words = [], [], []
    for note in [a for a in fig.layout.annotations if a.name == CELL_NOTE and a.text]:
        whole, brief = kept.get(box_key(note.x, note.y), (note.text.split("<br>"),) * 2)
        box = _box(fig, note)
        if box is None:
            continue
        size = note.font.size or 12
        shown, complete = fitted(list(whole), list(brief), lines_held(box[1] * plot_px, size),
                                 box[0] * width_px - 2 * SIDE_PX, size)
        note.text = "<br>".join(shown)
        if not complete and (note.x, note.y) not in hovered:
            xs.append(note.x)
            ys.append(note.y)
            words.append("<br>".join(plain(line) for line in whole))
    if xs:
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", marker=dict(size=18, opacity=0), hovertext=words,
                                 hovertemplate="%{hovertext}<extra></extra>", showlegend=False))
