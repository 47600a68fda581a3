"""The measured timeline's time axis: quiet stretches far longer than a typical span are cut short.

One slow moment (a thread that took 7 ms to start, a 10 ms forward while the CPU was busy elsewhere)
would otherwise set the scale and squeeze every other bar into a sliver. Between two consecutive
events (a span starting or ending) nothing starts or ends; such a stretch longer than `cap` is drawn
`cap` long. The order of everything stays as measured, only the bars across a cut get shorter, and
the figure marks each cut (//) while its hovers keep the measured times.

    scale = time_scale(starts_ms, ends_ms)      # cap: CAP_FACTOR × the 75th percentile of span lengths
    scale(t)                                    # where measured time t is drawn
    scale.cuts                                  # (start, end, drawn length) of every cut stretch
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# A stretch is cut when longer than CAP_FACTOR times the 75th percentile of the spans' lengths: a
# robust "long", which one slow span cannot move (checked on recorded traces: 1-5 cuts in 4 batches).
CAP_FACTOR = 5
CUT_MARK = "//"


@dataclass(frozen=True)
class Cut:
    """A quiet stretch drawn shorter than it took: measured start and end (ms), and its drawn length."""

    start: float
    end: float
    drawn: float


@dataclass(frozen=True)
class TimeScale:
    """Measured ms -> drawn position: the identity until the first cut, piecewise linear after it."""

    real: np.ndarray  # the events, measured ms, increasing
    drawn: np.ndarray  # where each is drawn
    cuts: tuple[Cut, ...]
    cap: float  # the longest a stretch is drawn (inf: nothing is cut)

    def __call__(self, t: np.ndarray | float) -> np.ndarray:
        if len(self.real) < 2:
            return np.asarray(t, dtype=float)
        return np.interp(t, self.real, self.drawn)

    def shortened(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """True where a bar from start to end is drawn shorter than it took (a cut crosses it)."""
        start, end = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
        lost = (end - start) - (self(end) - self(start))
        return lost > 1e-9 * max(1.0, float(np.max(np.abs(end), initial=0.0)))


def robust_cap(durations: np.ndarray) -> float:
    """CAP_FACTOR × the 75th percentile of the spans' lengths (inf when there is none, or all are 0)."""
    durations = np.asarray(durations, dtype=float)
    if durations.size == 0:
        return math.inf
    cap = CAP_FACTOR * float(np.percentile(durations, 75))
    return cap if cap > 0 else math.inf


def time_scale(starts: np.ndarray, ends: np.ndarray, cap: float | None = None) -> TimeScale:
    """The drawn axis for spans from `starts` to `ends` (ms): every quiet stretch drawn at most `cap` long."""
    starts, ends = np.asarray(starts, dtype=float), np.asarray(ends, dtype=float)
    if cap is None:
        cap = robust_cap(ends - starts)
    if not cap > 0:
        raise ValueError(f"cap must be positive, got {cap!r}")
    events = np.unique(np.concatenate([starts, ends]))
    if events.size < 2:
        return TimeScale(events, events, (), cap)
    gaps = np.diff(events)
    drawn_gaps = np.minimum(gaps, cap)
    drawn = events[0] + np.concatenate([[0.0], np.cumsum(drawn_gaps)])
    cuts = tuple(Cut(float(events[i]), float(events[i + 1]), float(cap)) for i in np.flatnonzero(gaps > cap))
    return TimeScale(events, drawn, cuts, cap)


def nice_step(rough: float) -> float:
    """1, 2 or 5 times a power of ten, at least `rough`."""
    power = 10 ** math.floor(math.log10(rough))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= rough)


# The fewest ticks worth an axis, and how close two may sit: a tick label is up to five characters
# ("1,250"), so on the narrowest chart (about 390 px of plot) eight across leave room between them.
MIN_TICKS, MIN_GAP_SHARE = 3, 1 / 8


def _finer(step: float) -> float:
    """The next smaller of the round steps: 5 -> 2 -> 1 -> 0.5."""
    mantissa = round(step / 10 ** math.floor(math.log10(step) + 1e-9))
    return step * (0.4 if mantissa == 5 else 0.5)


def _decimals(step: float) -> int:
    """Decimals that show a multiple of `step` exactly (0 for 5, 1 for 0.2, 2 for 0.05)."""
    return max(0, -math.floor(math.log10(step) + 1e-9))


def _spaced(scale: TimeScale, step: float, width: float) -> tuple[list[float], list[str]]:
    """Multiples of `step` outside the cuts, placed where drawn, each at least MIN_GAP_SHARE of the
    axis after the one before (a cut brings far times close together)."""
    lo, hi = float(scale.real[0]), float(scale.real[-1])
    first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
    if last - first > 100_000:  # far too fine for this axis: no tick would survive the spacing anyway
        return [], []
    decimals = _decimals(step)
    values, texts, previous = [], [], -math.inf
    for k in range(first, last + 1):
        t = k * step
        if any(c.start < t < c.end for c in scale.cuts):
            continue
        at = float(scale(t))
        if at - previous >= width * MIN_GAP_SHARE - 1e-12:
            values.append(at)
            texts.append(f"{t:,.{decimals}f}")
            previous = at
    return values, texts


def time_ticks(scale: TimeScale, count: int = 6) -> tuple[list[float], list[str]]:
    """About `count` ticks at round measured times (1, 2 or 5 times a power of ten, all written with the
    same decimals), placed where they are drawn; none inside a cut, none closer than MIN_GAP_SHARE of
    the axis to the one before. When cuts leave fewer than MIN_TICKS round times, a finer round step
    is tried (down to a hundredth of the axis) before the cuts' ends are labelled as they are."""
    if len(scale.real) < 2:
        return [], []
    width = float(scale.drawn[-1] - scale.drawn[0])
    if width <= 0:
        return [], []
    step = nice_step(width / count)
    best: tuple[list[float], list[str]] = ([], [])
    while step >= width / 100:
        values, texts = _spaced(scale, step, width)
        if len(values) > len(best[0]):
            best = values, texts
        if len(values) >= MIN_TICKS:
            return values, texts
        step = _finer(step)
    if len(best[0]) >= MIN_TICKS:
        return best
    # Still too few: where measured time resumes after each cut, to three significant digits.
    labels = dict(zip([float(scale.real[0])] + [c.end for c in scale.cuts],
                      [f"{t:,.3g}" for t in [float(scale.real[0])] + [c.end for c in scale.cuts]]))
    values, texts, previous = [], [], -math.inf
    for t in sorted(labels):
        at = float(scale(t))
        if at - previous >= width * MIN_GAP_SHARE:
            values.append(at)
            texts.append(labels[t])
            previous = at
    return values, texts
