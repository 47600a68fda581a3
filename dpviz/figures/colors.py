"""One colour per device, the same in every view and on the page's light and dark themes; a neutral
grey for idle.

Devices 0-6 take the Okabe-Ito palette (Okabe & Ito 2008), which stays distinct for the common forms
of colour blindness. Its order is chosen for a projector: neighbouring devices differ in lightness as
well as hue, and the pale yellow comes late so small runs never need it. Okabe-Ito's eighth colour,
black, vanishes on a dark page, so device 7 is a violet instead.

Sixteen colours cannot all be told apart by hue alone. Devices 8-15 (GPUs 9-16 counted from one)
take eight colours picked one by one from the sRGB cube (three kept from Paul Tol's palettes) to keep
the smallest CIELAB difference to every other device colour and to idle grey as large as possible
under normal, protan, deutan and tritan vision (simulated with Machado et al. 2009): at least 12 for
all sixteen, at least 16 among the first eight (tests/test_figures_colors.py checks both). They also
carry a second channel wherever a mark has an area or a symbol: bars are hatched (`device_pattern`)
and markers are diamonds instead of squares (`device_symbol`). Every label and hover names the GPU, so
colour is never the only cue.

On both themes (WCAG 1.4.11, 3:1 for graphics): every device colour has at least 3:1 against the dark
page (DARK_BACKGROUND) by its fill alone. On the white page the light ones (the orange, sky blue,
yellow and five of the second eight) do not, so every bar and marker drawn in a device colour gets an
OUTLINE, which has 12.6:1 against white. Text written on a device colour takes `text_color_on` it:
dark on the light colours, white on the dark ones, whichever contrasts more. Text that is not on a
mark sets no colour at all: it takes the page theme's.
"""
from __future__ import annotations

# Okabe-Ito, reordered: blue, orange, bluish green, vermillion, sky blue, reddish purple, yellow; then a
# violet where Okabe-Ito has black (furthest from the seven under all four visions, 3.1:1 on the dark page).
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442")
FIRST_EIGHT = OKABE_ITO + ("#8800FF",)
# Green, light violet, plum, dark yellow (Tol), light cyan (Tol), sage, olive (Tol) and pale green: none
# darker than 3:1 on the dark page (Tol's maroon, indigo, wine, dark red and blue vanished there).
SECOND_EIGHT = ("#00DD55", "#BB55FF", "#994477", "#666633", "#99DDFF", "#88BB77", "#999933", "#BBEEBB")
DEVICE_COLORS = FIRST_EIGHT + SECOND_EIGHT
MAX_DEVICES = len(DEVICE_COLORS)

IDLE_GREY = "#BBBBBB"  # a light neutral: no device colour is grey, under any of the four visions
# An argument a replica did not get: a mid grey, darker than idle, 4.5:1 on white, 4.2:1 on the dark
# page and 4.5:1 under white text. It reads as "nothing here" beside idle, never as a device (GPU 3's
# vermillion included); hatch it (MISSING_PATTERN) as its second cue.
MISSING = "#767676"
MISSING_PATTERN = "x"
OUTLINE = "#333333"  # the edge of every device-coloured mark: 12.6:1 on white, where the light fills are not
GUIDE = "rgba(128,128,128,0.5)"  # rules and guide lines: a mid grey that reads on white and on near-black
# Dark text on a light mark (text_color_on): black, since with black or white every colour gets at least
# 4.5:1 (WCAG AA; #222222 left GPU 3's vermillion at 4.1). Text off the marks sets no colour.
TEXT = "#000000"
WHITE = "#FFFFFF"
# The page's two themes (Streamlit's light and dark backgrounds), for the contrast checks.
LIGHT_BACKGROUND, DARK_BACKGROUND = "#FFFFFF", "#0E1117"
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
    return "" if i < len(FIRST_EIGHT) else "/"


def device_symbol(i: int) -> str:
    """Marker symbol for device `i`: squares for the first eight, diamonds for the second eight."""
    device_color(i)  # validates i
    return "square" if i < len(FIRST_EIGHT) else "diamond"


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


def blend(color: str, alpha: float, background: str) -> str:
    """The colour a reader sees where `color` is painted with opacity `alpha` over `background`."""
    if not 0 <= alpha <= 1:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha!r}")
    mixed = (round(alpha * c + (1 - alpha) * b) for c, b in zip(_rgb(color), _rgb(background)))
    return "#" + "".join(f"{c:02X}" for c in mixed)


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
    contrasts more (WCAG 2), so a "4" on GPU 6's yellow is dark and on GPU 7's violet is white."""
    return TEXT if contrast_ratio(color, TEXT) >= contrast_ratio(color, WHITE) else WHITE
