"""Device colours: one per device, distinct, Okabe-Ito first, idle grey apart from all of them, visible on
the page's light and dark themes."""
import itertools
import math
import re

import pytest

from dpviz.figures.colors import (
    DARK_BACKGROUND, IDLE_GREY, LIGHT_BACKGROUND, MAX_DEVICES, MISSING, MISSING_PATTERN, OKABE_ITO, OUTLINE, TEXT,
    WHITE, blend, cielab, contrast_ratio, delta_e76, delta_e2000, delta_e2000_lab, device_color, device_colors, device_colorscale, device_pattern, device_symbol,
    relative_luminance, text_color_on, with_alpha,
)

HEX = re.compile(r"^#[0-9A-F]{6}$")


def _rgb(color: str) -> tuple[int, int, int]:
    return tuple(int(color[k : k + 2], 16) for k in (1, 3, 5))


def test_sixteen_distinct_colours_and_idle_grey_is_none_of_them():
    colors = device_colors(16)
    assert MAX_DEVICES == 16 and len(set(colors)) == 16
    assert all(HEX.match(c) for c in colors + [IDLE_GREY])
    assert IDLE_GREY not in colors
    r, g, b = _rgb(IDLE_GREY)
    assert r == g == b  # neutral


def test_first_seven_are_okabe_ito_and_the_eighth_is_not_its_black():
    assert set(device_colors(7)) == {"#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7"}
    assert device_colors(7) == list(OKABE_ITO)
    assert device_color(7) != "#000000"  # black vanished on the dark page


def test_every_device_colour_shows_on_both_themes():
    """WCAG 1.4.11 (3:1 for graphics): on the dark page by the fill alone; on white, a fill under 3:1 is
    outlined by OUTLINE, which views draw around every device-coloured bar and marker."""
    assert contrast_ratio(OUTLINE, LIGHT_BACKGROUND) >= 3
    for i, color in enumerate(device_colors(16)):
        assert contrast_ratio(color, DARK_BACKGROUND) >= 3, f"GPU {i} ({color}) vanishes on the dark page"
        assert contrast_ratio(color, LIGHT_BACKGROUND) >= 3 or contrast_ratio(OUTLINE, LIGHT_BACKGROUND) >= 3
    dark_ones = [c for c in device_colors(16) if contrast_ratio(c, DARK_BACKGROUND) < 3]
    assert not dark_ones
    # The light ones that lean on the outline on white: what the outline rule is for.
    assert {c for c in device_colors(16) if contrast_ratio(c, LIGHT_BACKGROUND) < 3} >= {device_color(6)}


def test_missing_is_a_neutral_no_device_colour_and_shows_on_both_themes():
    r, g, b = _rgb(MISSING)
    assert r == g == b and MISSING != IDLE_GREY and MISSING_PATTERN
    assert min(contrast_ratio(MISSING, bg) for bg in (LIGHT_BACKGROUND, DARK_BACKGROUND)) >= 3
    assert contrast_ratio(MISSING, text_color_on(MISSING)) >= 4.5  # a cell's words stay readable on it


def test_devices_nine_to_sixteen_carry_a_second_channel():
    assert [device_pattern(i) for i in range(8)] == [""] * 8
    assert all(device_pattern(i) for i in range(8, 16))
    assert {device_symbol(i) for i in range(8)} != {device_symbol(i) for i in range(8, 16)}


def test_same_colour_every_call():
    assert device_color(3) == device_color(3) == device_colors(8)[3]


@pytest.mark.parametrize("bad", [-1, 16, 99])
def test_out_of_range_device_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="device index must be between 0 and 15"):
        device_color(bad)


def test_colorscale_puts_each_device_in_its_own_step():
    scale = device_colorscale(3)  # idle, GPU 0, GPU 1, GPU 2 over 4 equal steps
    assert scale[0] == [0.0, IDLE_GREY] and scale[1] == [0.25, IDLE_GREY]
    assert scale[2] == [0.25, device_color(0)] and scale[-1] == [1.0, device_color(2)]


def test_with_alpha():
    assert with_alpha("#0072B2", 0.5) == "rgba(0,114,178,0.5)"
    with pytest.raises(ValueError):
        with_alpha("blue", 0.5)


def test_blend_is_what_shows_through():
    assert blend("#0072B2", 1, "#FFFFFF") == "#0072B2" and blend("#0072B2", 0, "#0E1117") == "#0E1117"
    assert blend("#000000", 0.5, "#FFFFFF") == "#808080"
    with pytest.raises(ValueError, match="alpha"):
        blend("#000000", 1.5, "#FFFFFF")


def test_contrast_follows_wcag():
    assert relative_luminance("#000000") == 0 and relative_luminance("#FFFFFF") == 1
    assert contrast_ratio("#000000", "#FFFFFF") == pytest.approx(21) == contrast_ratio("#FFFFFF", "#000000")
    assert contrast_ratio("#767676", "#FFFFFF") == pytest.approx(4.54, abs=0.01)  # WCAG's own AA example
    with pytest.raises(ValueError):
        relative_luminance("yellow")


def test_text_on_a_device_colour_is_dark_on_light_and_white_on_dark():
    assert text_color_on(device_color(6)) == TEXT  # GPU 6's yellow: a white "4" on it was unreadable
    assert text_color_on(device_color(7)) == WHITE and text_color_on(device_color(0)) == WHITE  # violet, blue
    assert text_color_on(IDLE_GREY) == TEXT
    for color in device_colors(16) + [IDLE_GREY]:
        chosen = text_color_on(color)
        other = WHITE if chosen == TEXT else TEXT
        assert contrast_ratio(color, chosen) >= contrast_ratio(color, other)
        # 4.5 is WCAG AA for small text; black on vermillion (#D55E00) gives 5.2, where #222222 gave 4.1.
        assert contrast_ratio(color, chosen) >= 4.5


# Colour-vision deficiency simulation (Machado, Oliveira & Fernandes 2009, severity 1) in linear RGB.
CVD = {
    "normal": ((1, 0, 0), (0, 1, 0), (0, 0, 1)),
    "protan": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216), (-0.003882, -0.048116, 1.051998)),
    "deutan": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413), (-0.011820, 0.042940, 0.968881)),
    "tritan": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602), (0.004733, 0.691367, 0.303900)),
}


def _lab(color: str, vision: str) -> tuple[float, float, float]:
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (v / 255 for v in _rgb(color))]
    seen = [min(1.0, max(0.0, sum(m * c for m, c in zip(row, linear)))) for row in CVD[vision]]
    xyz = [sum(m * c for m, c in zip(row, seen)) for row in
           ((0.4124, 0.3576, 0.1805), (0.2126, 0.7152, 0.0722), (0.0193, 0.1192, 0.9505))]
    f = [t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in (v / w for v, w in zip(xyz, (0.95047, 1.0, 1.08883)))]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def _min_difference(colors: list[str], vision: str) -> float:
    labs = [_lab(c, vision) for c in colors]
    return min(sum((a - b) ** 2 for a, b in zip(labs[i], labs[j])) ** 0.5
               for i in range(len(labs)) for j in range(i + 1, len(labs)))


@pytest.mark.parametrize("vision", list(CVD))
def test_colours_stay_apart_for_colour_blind_viewers(vision):
    assert _min_difference(device_colors(8), vision) >= 16
    assert _min_difference(device_colors(16) + [IDLE_GREY], vision) >= 12
    # An argument a replica did not get never reads as a device, nor as idle.
    assert _min_difference(device_colors(16) + [IDLE_GREY, MISSING], vision) >= 10


def _engines():
    from dpviz.engines.ddp.vocabulary import VOCABULARY as DDP
    from dpviz.engines.dp.vocabulary import VOCABULARY as DP
    return [DP, DDP]


def _every_engine():
    from dpviz.engines import ENGINES
    return [spec.part("vocabulary") for spec in ENGINES.values()]


@pytest.mark.parametrize("vocabulary", _every_engine(), ids=lambda v: v.engine)
def test_every_engines_own_colours_show_on_both_themes(vocabulary):
    """Every engine's phases with a colour of their own are marks on the page's background (a thin bar on the
    Timeline, an arrow in One step): 3:1 on the light and the dark page. (A pipeline's send of activations was
    #2255AA, 2.7:1 on the dark page.)"""
    own = {p.color for p in vocabulary.phases if p.color != "lane"}
    for color in own:
        assert min(contrast_ratio(color, bg) for bg in (LIGHT_BACKGROUND, DARK_BACKGROUND)) >= 3, color


@pytest.mark.parametrize("vocabulary", _engines(), ids=lambda v: v.engine)
@pytest.mark.parametrize("vision", list(CVD))
def test_memory_kinds_stay_apart_and_are_no_device_colour(vision, vocabulary):
    colors = [kind.color for kind in vocabulary.memory_kinds]
    assert all(HEX.match(c) for c in colors) and not set(colors) & set(device_colors(16) + [IDLE_GREY])
    assert _min_difference(colors, vision) >= 20


# Sharma, Wu & Dalal (2005), "The CIEDE2000 color-difference formula": pairs from their test data, with
# the published differences to four decimals (a hue across 0°, a neutral, large and small differences).
SHARMA = [
    ((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
    ((50.0, -1.3802, -84.2814), (50.0, 0.0, -82.7485), 1.0000),
    ((50.0, 2.49, -0.001), (50.0, -2.49, 0.0009), 7.1792),
    ((50.0, 2.5, 0.0), (50.0, 0.0, -2.5), 4.3065),
    ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),
    ((50.0, 2.5, 0.0), (61.0, -5.0, 29.0), 22.8977),
    ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
    ((22.7233, 20.0904, -46.694), (23.0331, 14.973, -42.5619), 2.0373),
    ((90.8027, -2.0831, 1.441), (91.1528, -1.6435, 0.0447), 1.4441),
    ((2.0776, 0.0795, -1.135), (0.9033, -0.0636, -0.5514), 0.9082),
]


@pytest.mark.parametrize("first,second,expected", SHARMA)
def test_ciede2000_matches_its_published_test_data(first, second, expected):
    assert delta_e2000_lab(first, second) == pytest.approx(expected, abs=1e-4)
    assert delta_e2000_lab(second, first) == pytest.approx(expected, abs=1e-4)


def test_cielab_of_the_primaries():
    assert cielab("#FFFFFF") == pytest.approx((100, 0, 0), abs=0.01)
    assert cielab("#FF0000") == pytest.approx((53.24, 80.09, 67.20), abs=0.05)  # sRGB red, D65
    assert delta_e76("#000000", "#FFFFFF") == pytest.approx(100, abs=0.01)


@pytest.mark.parametrize("vocabulary", _engines(), ids=lambda v: v.engine)
def test_memory_kinds_read_as_no_device(vocabulary):
    """A stacked bar's kinds were read as GPUs ('batch and chunks' as GPU 1's orange, parameters as GPU
    7's violet): each kind is now at least 25 (CIE76) from every one of the sixteen device colours. The
    fills are opaque, so they look the same on the light and the dark page, and the difference holds on
    both. CIEDE2000, which weighs vivid hues as people see them, cannot reach 25 for eight kinds against
    sixteen devices spread over the gamut (only very dark or very pale colours are that far from all of
    them); it is at least 15 here, where the old kinds came to 5-14."""
    for kind in vocabulary.memory_kinds:
        for device, color in enumerate(device_colors(16)):
            assert delta_e76(kind.color, color) >= 25, (kind.name, f"GPU {device}", color)
            assert delta_e2000(kind.color, color) >= 15, (kind.name, f"GPU {device}", color)


@pytest.mark.parametrize("vocabulary", _engines(), ids=lambda v: v.engine)
def test_memory_kinds_show_on_both_themes(vocabulary):
    """Stacked memory bars are outlined (OUTLINE) like device bars: on the dark page each kind's fill must
    show by itself (the old 'parameters' #222255 had 1.3:1 there)."""
    for kind in vocabulary.memory_kinds:
        assert contrast_ratio(kind.color, DARK_BACKGROUND) >= 3, f"{kind.name} ({kind.color}) vanishes on the dark page"


@pytest.mark.parametrize("vocabulary", _every_engine(), ids=lambda v: v.engine)
def test_phase_colours_show_on_both_themes_and_stay_apart(vocabulary):
    """A phase with a colour of its own (a host copy, DDP's communication) is a thin bar in the timeline:
    3:1 on both pages by its fill, apart from the engine's other such phases under the four visions,
    and no device colour (GPU 14's olive was DDP's join)."""
    own = {p.color for p in vocabulary.phases if p.color != "lane"}
    for color in own:
        assert HEX.match(color)
        assert min(contrast_ratio(color, bg) for bg in (LIGHT_BACKGROUND, DARK_BACKGROUND)) >= 3, color
    assert not own & set(device_colors(16) + [IDLE_GREY, MISSING])
    for vision in CVD:
        assert _min_difference(sorted(own), vision) >= 15
        assert min(_min_difference([c, d], vision) for c in own for d in device_colors(16) + [IDLE_GREY]) >= 10


def test_the_legends_kinds_read_apart_and_as_no_device():
    """One colour per kind of collective in every engine (dpviz.trace.legend): magenta was DDP's all-reduce and FSDP's
    forward all-gather, and tan brown DDP's broadcast and FSDP's reduce-scatter. Each kind now 3:1 on both pages,
    15 (CIE76) or more from every other kind under each of the four visions, and 10 from every device colour and
    idle grey, so that what moves never reads as a device."""
    from dpviz.trace.legend import KINDS

    colors = [kind.color for kind in KINDS.values()]
    assert len(set(colors)) == len(colors) == 8
    for color in colors:
        assert HEX.match(color) and min(contrast_ratio(color, bg) for bg in (LIGHT_BACKGROUND, DARK_BACKGROUND)) >= 3
    for vision in CVD:
        assert _min_difference(colors, vision) >= 15, vision
        assert min(_min_difference([c, d], vision) for c in colors for d in device_colors(16) + [IDLE_GREY]) >= 10


def test_send_receive_reads_apart_from_the_stages_it_runs_between():
    """A pipeline's sends and receives run on its stages' lanes (devices 0-3 at four stages): a blue beside stage 1's
    blue (CIEDE2000 12) read as stage 1's own work in the Timeline. It is now a hue of its own, 30 or more from each."""
    from dpviz.trace.legend import kind_color

    for device, color in enumerate(device_colors(4)):
        assert delta_e2000(kind_color("send/receive"), color) >= 30, f"GPU {device}"


@pytest.mark.parametrize("vocabulary", _every_engine(), ids=lambda v: v.engine)
def test_every_engine_draws_what_moves_in_the_legends_colours(vocabulary):
    """A phase that moves data takes its kind's colour, whatever the engine; two of one kind in one engine (FSDP's
    all-gathers, a pipeline's sends and receives) differ by their hatch."""
    from dpviz.trace.legend import KINDS

    moving = vocabulary.moving
    assert moving, vocabulary.engine
    for phase in moving:
        assert phase.color == KINDS[phase.kind].color
    for first, second in itertools.combinations(moving, 2):
        if first.kind == second.kind:
            assert first.hatch != second.hatch, (first.name, second.name)


def test_a_phase_that_moves_data_refuses_a_colour_of_its_own():
    from dpviz.trace.vocabulary import EVERY_LANE, Phase

    with pytest.raises(ValueError, match="legend's colour"):
        Phase("allreduce", EVERY_LANE, "all-reduce", "all-reduce", color="#DD00BB", kind="all-reduce")
    with pytest.raises(ValueError, match="legend's kinds are"):
        Phase("allreduce", EVERY_LANE, "all-reduce", "all-reduce", kind="all-to-all")


def test_a_kind_of_memory_has_one_colour_in_every_engine():
    # A teacher flips engines on one link: parameters, gradients, optimizer state, ... keep their colours, as the
    # page of every engine draws them side by side in one legend.
    colours: dict[str, set[str]] = {}
    for vocabulary in _every_engine():
        for kind in vocabulary.memory_kinds:
            colours.setdefault(kind.name, set()).add(kind.color)
    assert {name: sorted(found) for name, found in colours.items() if len(found) > 1} == {}
