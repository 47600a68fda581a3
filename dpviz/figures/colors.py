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

import math

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
# The page theme's own text colour, as st.plotly_chart(theme="streamlit") writes it: Streamlit replaces this
# placeholder, wherever it appears in a figure, with its theme's body text (dark on the light page, light
# on the dark one). Its default for axis labels and subtitles is a faded grey, 3.7:1 on white; text set in
# this colour follows the theme and keeps WCAG's 4.5:1 on both. Outside Streamlit it is a near-black navy.
THEME_TEXT = "#000037"
# The page theme's own background, a placeholder Streamlit replaces as it replaces THEME_TEXT: white on the light page,
# near-black on the dark one (outside Streamlit, layout.light() makes it white). A stroke in it under a line clears
# what that line crosses, as a gap would.
THEME_BACKGROUND = "#000038"
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


def hatch_ink(label_ink: str) -> str:
    """The ink of a hatch under a label written in `label_ink`: white under black text, black under white, so the
    hatch moves its fill's colour away from the label's and never takes from its contrast."""
    return WHITE if label_ink == TEXT else TEXT


def cielab(color: str) -> tuple[float, float, float]:
    """CIE L*a*b* (D65 white) of an sRGB colour ("#RRGGBB")."""
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (v / 255 for v in _rgb(color))]
    xyz = [sum(m * c for m, c in zip(row, linear)) for row in
           ((0.4124564, 0.3575761, 0.1804375), (0.2126729, 0.7151522, 0.0721750), (0.0193339, 0.1191920, 0.9503041))]
    f = [t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29
         for t in (v / w for v, w in zip(xyz, (0.95047, 1.0, 1.08883)))]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def delta_e76(a: str, b: str) -> float:
    """CIE76 colour difference: the distance between two colours in CIELAB (about 2.3 is just noticeable)."""
    return math.dist(cielab(a), cielab(b))


def delta_e2000(a: str, b: str) -> float:
    """CIEDE2000 colour difference (Sharma, Wu & Dalal 2005), the CIE's formula closest to what people see:
    it weighs hue and chroma less where colours are vivid, so vivid pairs read closer than CIE76 says."""
    return delta_e2000_lab(cielab(a), cielab(b))


def delta_e2000_lab(first: tuple[float, float, float], second: tuple[float, float, float]) -> float:
    """CIEDE2000 between two CIELAB colours."""
    (l1, a1, b1), (l2, a2, b2) = first, second
    c_mean = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(c_mean ** 7 / (c_mean ** 7 + 25 ** 7)))
    a1, a2 = (1 + g) * a1, (1 + g) * a2
    c1, c2 = math.hypot(a1, b1), math.hypot(a2, b2)
    h1 = math.degrees(math.atan2(b1, a1)) % 360 if c1 else 0.0
    h2 = math.degrees(math.atan2(b2, a2)) % 360 if c2 else 0.0
    dh = 0.0 if c1 * c2 == 0 else (h2 - h1 + 180) % 360 - 180
    d_hue = 2 * math.sqrt(c1 * c2) * math.sin(math.radians(dh / 2))
    l_mean, c_mean = (l1 + l2) / 2, (c1 + c2) / 2
    if c1 * c2 == 0:
        h_mean = h1 + h2
    elif abs(h1 - h2) <= 180:
        h_mean = (h1 + h2) / 2
    else:
        h_mean = (h1 + h2 + 360) / 2 if h1 + h2 < 360 else (h1 + h2 - 360) / 2
    t = (1 - 0.17 * math.cos(math.radians(h_mean - 30)) + 0.24 * math.cos(math.radians(2 * h_mean))
         + 0.32 * math.cos(math.radians(3 * h_mean + 6)) - 0.20 * math.cos(math.radians(4 * h_mean - 63)))
    rotation = 30 * math.exp(-(((h_mean - 275) / 25) ** 2))
    r_c = 2 * math.sqrt(c_mean ** 7 / (c_mean ** 7 + 25 ** 7))
    s_l = 1 + 0.015 * (l_mean - 50) ** 2 / math.sqrt(20 + (l_mean - 50) ** 2)
    s_c, s_h = 1 + 0.045 * c_mean, 1 + 0.015 * c_mean * t
    r_t = -math.sin(math.radians(2 * rotation)) * r_c
    dl, dc, dhh = (l2 - l1) / s_l, (c2 - c1) / s_c, d_hue / s_h
    return math.sqrt(dl ** 2 + dc ** 2 + dhh ** 2 + r_t * dc * dhh)
