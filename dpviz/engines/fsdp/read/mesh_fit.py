"""What a rank's box on the mesh holds: its words wrapped to the box's width on the narrowest chart and cut to the lines
its height holds on a projector, each share told as fully as there is room for (the hover names every parameter).

    rank_lines(0, "dp_shard 0, tp 0", [(Fraction(1, 4), ["net.0.weight", "net.0.bias", "net.2.weight"])], dp=2)
    # ['<b>rank 0</b>', 'dp_shard 0, tp 0', '1/4 of net.0.weight,', 'net.0.bias, net.2.weight']

A box is BOX_WIDTH of its column and BOX_HEIGHT of its row. Its words are NOTE_SIZE px on the usual chart and
presentation()'s larger type on a projector's, which has room to match: the usual narrowest chart sets the width, the
projector's larger lines the height (the rows keep their pixels there: words lie on the plot).
"""
from __future__ import annotations

from fractions import Fraction

from dpviz.figures.sizes import LINE_EM, MARGIN, NARROWEST_PX, PROJECTOR_PX
from dpviz.figures.text_fit import text_px

NOTE_SIZE = 12  # px, a rank's words on the usual chart
BOX_WIDTH, BOX_HEIGHT = 0.8, 0.76  # of a column, of a row
# The page's chart in an 800 px window: 452 px measured, NARROWEST_PX (468) the most it may be; 440 keeps words
# inside wherever the page's own width falls between (as the pipeline's grids).
CHART_PX = min(440, NARROWEST_PX)
PRESENTING = 1.35  # presentation()'s type and margins, times the usual


def box_width_px(dp: int) -> float:
    """A box's width in px of NOTE_SIZE type: the narrower of the usual narrowest chart's and a projector's (whose
    larger type is the same words at PRESENTING times the size, in margins PRESENTING times as wide)."""
    usual = CHART_PX - MARGIN["l"] - MARGIN["r"]
    projector = (PROJECTOR_PX - (MARGIN["l"] + MARGIN["r"]) * PRESENTING) / PRESENTING
    return BOX_WIDTH * min(usual, projector) / dp


def box_lines(row_px: float) -> int:
    """Lines a box in a row `row_px` tall holds at a projector's larger type."""
    return max(1, int(BOX_HEIGHT * row_px // (NOTE_SIZE * PRESENTING * LINE_EM)))


def fits(line: str, width_px: float) -> bool:
    return text_px(line, NOTE_SIZE) <= width_px


def _wrapped(words: list[str], joiner: str, width_px: float) -> list[str] | None:
    """`words` joined by `joiner` on as few lines as fit `width_px` (a line ends at a joiner, which stays on it); None
    where one word alone is wider."""
    lines: list[str] = []
    for k, word in enumerate(words):
        piece = word + (joiner.rstrip() if k < len(words) - 1 else "")
        if lines and fits(lines[-1] + " " + piece, width_px):
            lines[-1] += " " + piece
        elif fits(piece, width_px):
            lines.append(piece)
        else:
            return None
    return lines


def fraction_words(share: Fraction) -> str:
    return "none" if share == 0 else "all" if share == 1 else f"{share.numerator}/{share.denominator}"


def share_forms(share: Fraction, names: list[str], width_px: float) -> list[list[str]]:
    """The ways to tell one share in the box, fullest first, each as its lines: every name ('1/4 of net.0.weight,' /
    'net.0.bias'), then their count ('1/4 of 12 tensors'), then the share alone ('1/4')."""
    part = fraction_words(share)
    counted = f"{len(names)} tensor{'s' if len(names) > 1 else ''}"
    forms = [_wrapped(f"{part} of {', '.join(names)}".split(" "), " ", width_px) if len(names) == 1 else
             _wrapped([f"{part} of {names[0]}", *names[1:]], ", ", width_px),
             _wrapped(f"{part} of {counted}".split(" "), " ", width_px), _wrapped([part], "", width_px)]
    return [form for form in forms if form]


def rank_lines(rank: int, where: str, shares: list[tuple[Fraction, list[str]]], dp: int, row_px: float = 150.0) -> list[str]:
    """A rank's box: its number, its coordinates (`where`) and its shares, largest first, each as fully as the box's
    lines leave room for, fuller for the earlier; what finds no room is counted on a last line ('and 2 more')."""
    width, room = box_width_px(dp), box_lines(row_px)
    head = next((form for form in ([f"<b>rank {rank}</b>"], [f"<b>{rank}</b>"]) if fits(form[0], width)), [])
    lines = head + ([where] if fits(where, width) else [])  # on one line or not at all: the axes name them too
    forms = [share_forms(share, names, width) for share, names in shares]
    forms = [form for form in forms if form]
    shown, more = len(forms), []
    while shown and len(lines) + sum(len(f[-1]) for f in forms[:shown]) + len(more) > room:  # the rest counted
        shown -= 1
        more = [f"and {len(forms) - shown} more"] if fits(f"and {len(forms) - shown} more", width) else []
    told = [len(f) - 1 for f in forms[:shown]]  # each shown share's form, from its shortest; fuller, the earlier first
    used = len(lines) + len(more) + sum(len(f[t]) for f, t in zip(forms, told))
    for k, form in enumerate(forms[:shown]):
        while told[k] > 0 and used - len(form[told[k]]) + len(form[told[k] - 1]) <= room:
            used += len(form[told[k] - 1]) - len(form[told[k]])
            told[k] -= 1
    return lines + [line for f, t in zip(forms, told) for line in f[t]] + more
