"""How much room text takes on a chart and where it is wrapped to fit: plotly never wraps a title, a
note or an axis title, so every view wraps its words here.

`wrap` breaks a line (with SOFT_BREAKs that `unwrap` removes, so presentation() can wrap it again at a
larger size) where a chart `width_px` wide would cut it; `line_count` counts the lines a text takes;
`visible_length` and `text_px` measure plotly's HTML as a reader sees it.
"""
from __future__ import annotations

import html
import re

from dpviz.figures.sizes import NARROWEST_PX

# The house font averages 0.45 em a character in Chromium (Arial's metrics) and Inter 0.5, so 0.5 is safe.
CHAR_EM = 0.5
SLACK = 1.1  # the estimate is on the safe side (Arial's 0.45 em): a line up to 10% over it still fits
SOFT_BREAK = "<br />"  # where styled() wrapped a line: presentation() can wrap again at a larger size
SEPARATOR = " · "
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)


def visible_length(text: str) -> int:
    """Characters a reader sees in plotly's HTML: tags not counted, an entity (&lt;) one character."""
    return len(html.unescape(re.sub(r"<[^>]*>", "", text)))


def _chars_per_line(size: float, width_px: float = NARROWEST_PX) -> int:
    return max(12, int((width_px - 10) / (CHAR_EM * size)))


_NUMBER = re.compile(r"[\d][\d,.\-–]*$")
_MARKS = ((SEPARATOR.strip(), 3), (":", 2), (";", 2), (",", 1))  # a note's end, a clause's, a list item's


def _seen_before(line: str) -> list[int]:
    """For each index of `line` and its end, the visible characters before it: a tag's characters not counted, an
    entity's first character counted for the whole entity."""
    seen, inside, counts = 0, False, [0] * (len(line) + 1)
    i = 0
    while i < len(line):
        ch = line[i]
        counts[i] = seen
        if ch == "<":
            inside = True
        elif ch == ">" and inside:
            inside = False
        elif not inside:
            if ch == "&" and (m := re.match(r"&#?\w+;", line[i:])):
                for k in range(i + 1, i + len(m.group())):
                    counts[k] = seen + 1
                i += len(m.group())
                seen += 1
                continue
            seen += 1
        i += 1
    counts[len(line)] = seen
    return counts


def _bound(before: str, after: str) -> bool:
    """A space inside a phrase with a number in it ("10 of 16 GPUs", "batch 0 of 150", "GPUs 0-9"):
    the number stays with the words on either side of it."""
    if before.endswith(tuple(m for m, _ in _MARKS)):  # a clause's end is a break, number or not
        return False
    last, following = before.rsplit(" ", 1)[-1], after.split(" ", 1)[0]
    return bool(_NUMBER.match(last) or _NUMBER.match(following.rstrip(":;,")))


# A unit after a number ("1.75 MiB", "3.1 ms", "4 ×"): the two are never put on different lines.
_UNIT = re.compile(r"(B|KiB|MiB|GiB|TiB|ns|µs|ms|s|%|×)(?![\w])")


def _unit_split(before: str, after: str) -> bool:
    """A break between a number and its unit."""
    return bool(_NUMBER.match(before.rsplit(" ", 1)[-1]) and _UNIT.match(after))


def _short(text: str) -> bool:
    """A line of one or two short words, which reads as left over."""
    return len(text.split()) <= 2 and visible_length(text) <= 12


def _wrap_line(line: str, limit: int) -> list[str]:
    """One line (no breaks in it) cut into lines of at most `limit` visible characters, as few as can
    be; among as many, the cut that leaves no line of one or two short words, breaks no phrase with a
    number in it, ends lines at a note's or a clause's end (' · ', ': ', '; ', ', ') and fills the
    lines most evenly. A tag or an entity is never cut; a line a little over (SLACK) is left whole."""
    # The line is read once: every suffix a cut leaves starts at a word, whose spaces and counts are the line's own
    # from there (reading each suffix again made a long note's wrap quadratic in Python's loop)
    seen = _seen_before(line)
    spaces = [i for i, (a, b) in enumerate(zip(seen, seen[1:])) if line[i] == " " and b > a]
    memo: dict[int, tuple[tuple, list[str]]] = {}

    def best(start: int) -> tuple[tuple, list[str]]:
        if start in memo:
            return memo[start]
        rest = line[start:]
        if visible_length(rest) <= limit * SLACK:
            memo[start] = ((1, int(_short(rest)), 0, 0, 0), [rest])
            return memo[start]
        options = []
        for at in spaces:
            if at <= start:
                continue
            i, before = at - start, seen[at] - seen[start]
            if before > limit:
                break
            first, tail = rest[:i].rstrip(), rest[i + 1:].lstrip()
            if not first or not tail or _unit_split(first, tail):
                continue
            cost, lines = best(len(line) - len(tail))
            mark = next((bonus for m, bonus in _MARKS if first.endswith(m)), 0)
            own = (1, int(_short(first)), int(_bound(first, tail)), -mark, (limit - before) ** 2)
            options.append((tuple(a + b for a, b in zip(own, cost)), [first] + lines))
        memo[start] = min(options, key=lambda o: o[0]) if options else ((1, 0, 0, 0, 0), [rest])
        return memo[start]

    return best(0)[1]


def wrap(text: str, size: float, width_px: float = NARROWEST_PX) -> str:
    """`text` with SOFT_BREAKs where a chart `width_px` wide would cut a line of `size` px type; the
    breaks it already has are kept."""
    limit = _chars_per_line(size, width_px)
    lines = [_wrap_line(part, limit) for part in _BREAK.split(text)]
    hard = _BREAK.findall(text)
    return "".join(SOFT_BREAK.join(group) + (hard[k] if k < len(hard) else "") for k, group in enumerate(lines))


def unwrap(text: str) -> str:
    """`text` without the breaks wrap() added."""
    return text.replace(SOFT_BREAK, " ")


def line_count(text: str) -> int:
    return 0 if not text else 1 + len(_BREAK.findall(text))



# Arial's advance widths in ems, by kind of character (the house font falls back to it): capitals and
# digits are wider than CHAR_EM, so a legend of "GPU 10"s would take more room than 0.5 em a character.
_EM = {**dict.fromkeys("ijl.,:;'|!", 0.28), **dict.fromkeys("ft()[]/-r ", 0.34), **dict.fromkeys("mwMW%@", 0.86),
       **dict.fromkeys("ABCDEFGHIJKLNOPQRSTUVXYZ", 0.72), **dict.fromkeys("0123456789", 0.56)}


def widest_line_px(text: str, size: float) -> float:
    """Width in pixels of `text`'s longest line (lines broken by <br>), at `size` px."""
    return max(text_px(line, size) for line in _BREAK.split(text))


def text_px(text: str, size: float) -> float:
    """Width in pixels of `text` (plotly's HTML) at `size` px, in Arial's widths, a little on the wide side."""
    plain = html.unescape(re.sub(r"<[^>]*>", "", text))
    return sum(_EM.get(ch, 0.56) for ch in plain) * size
