"""One colour per device, the same in every view; a neutral grey for idle.

Devices 0-7 take the Okabe-Ito palette (Okabe & Ito 2008), which stays distinct for the common forms
of colour blindness. Its order is chosen for a projector: neighbouring devices differ in lightness as
well as hue, and the pale yellow comes late so small runs never need it.

Sixteen colours cannot all be told apart by hue alone. Devices 8-15 (GPUs 9-16 counted from one)
take eight colours, mostly from Paul Tol's palettes, picked one by one to keep the smallest CIELAB
difference to every other device colour and to idle grey as large as possible under normal,
protan, deutan and tritan vision (simulated with Machado et al. 2009): at least 12 for all sixteen,
at least 16 among the first eight (tests/test_figures_colors.py checks both). They also carry a
second channel wherever a mark has an area or a symbol: bars are hatched (`device_pattern`) and
markers are diamonds instead of squares (`device_symbol`). Every label and hover names the GPU, so
colour is never the only cue. Text written on a device colour takes `text_color_on` it: dark on the
light colours, white on the dark ones, whichever contrasts more.
"""
from __future__ import annotations

# Okabe-Ito, reordered: blue, orange, bluish green, vermillion, sky blue, reddish purple, yellow, black.
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442", "#000000")
# Maroon, Tol indigo, wine, dark yellow, light cyan, dark red, olive and high-contrast blue, in the
# order they were picked: the most distinct first, since GPU 8 is needed more often than GPU 15.
SECOND_EIGHT = ("#800000", "#332288", "#882255", "#666633", "#99DDFF", "#663333", "#999933", "#004488")
DEVICE_COLORS = OKABE_ITO + SECOND_EIGHT
MAX_DEVICES = len(DEVICE_COLORS)

IDLE_GREY = "#BBBBBB"  # lighter than any device colour, so idle never reads as "GPU 7" (black)
OUTLINE = "#333333"  # a thin dark edge keeps the yellow readable on a washed-out projector
TEXT = "#222222"
WHITE = "#FFFFFF"
# Phases and kinds of memory take the colours their engine's vocabulary gives them (dpviz.engines.*.vocabulary).


def device_color(i: int) -> str:
    """The colour of device `i` (0-based, as in device_ids)."""
    if not 0 <= i < MAX_DEVICES:
        raise ValueError(f"device index must be between 0 and {MAX_DEVICES - 1}, got {i}")
    return DEVICE_COLORS[i]


def device_colors(count: int) -> list[str]:
    """The colours of devices 0 .. count-1."""
    return [device_color(i) for i in range(count)]


def device_pattern(i: int) -> str:
    """Bar hatch for device `i`: none for the first eight, diagonal for the second eight."""
    device_color(i)  # validates i
    return "" if i < len(OKABE_ITO) else "/"


def device_symbol(i: int) -> str:
    """Marker symbol for device `i`: squares for the first eight, diamonds for the second eight."""
    device_color(i)  # validates i
    return "square" if i < len(OKABE_ITO) else "diamond"


def _rgb(color: str) -> tuple[int, int, int]:
    if len(color) != 7 or not color.startswith("#"):
        raise ValueError(f"expected a colour like #0072B2, got {color!r}")
    r, g, b = (int(color[k : k + 2], 16) for k in (1, 3, 5))
    return r, g, b


def with_alpha(color: str, alpha: float) -> str:
    """`color` ("#RRGGBB") as an rgba() string with opacity `alpha`."""
    r, g, b = _rgb(color)
    return f"rgba({r},{g},{b},{alpha:g})"


def device_colorscale(count: int) -> list[list]:
    """A stepped colourscale for a heatmap whose z is -1 (idle) or a device index 0 .. count-1.

    Use it with zmin=-1.5 and zmax=count-0.5 so every integer falls in the middle of its step.
    """
    colors = [IDLE_GREY] + device_colors(count)
    scale: list[list] = []
    for i, color in enumerate(colors):
        scale.append([i / len(colors), color])
        scale.append([(i + 1) / len(colors), color])
    return scale


def relative_luminance(color: str) -> float:
    """WCAG 2 relative luminance of `color` ("#RRGGBB"): 0 for black, 1 for white."""
    channels = (c / 255 for c in _rgb(color))
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two colours, from 1 (the same) to 21 (black on white)."""
    light, dark = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def text_color_on(color: str) -> str:
    """The text colour to write on a mark filled with `color`: the house dark TEXT or white, whichever
    contrasts more (WCAG 2), so a "4" on GPU 6's yellow is dark and on GPU 7's black is white."""
    return TEXT if contrast_ratio(color, TEXT) >= contrast_ratio(color, WHITE) else WHITE
