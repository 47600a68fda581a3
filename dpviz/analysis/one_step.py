"""One step of any engine, in the same columns: what each device holds or does, and what moves between devices.

    picture = trace.spec.part("one_step")(trace, step)   # an engine's reader fills it from its trace
    dpviz.figures.one_step.one_step_figure(picture)       # every engine's picture is drawn the same way

A class flips DataParallel -> DDP -> ZeRO-1 -> FSDP -> a pipeline and points at what changed: the columns never
change, only what sits in them. Bytes on an arrow are the size of the tensors handed over, as the trace recorded
them (DataParallel's copies, what each rank gave its collective, what a stage sent); a ring sends about
2(W-1)/W of an all-reduce's bytes on the wire, which the Compare view counts.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from dpviz.analysis.opening_step import opening_reason
from dpviz.analysis.batch_facts import batches_planned
from dpviz.analysis.wording import counted, human_bytes, numbered
from dpviz.trace.legend import KINDS

# The parts of a step every engine goes through, in order: (key, heading).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("input", "Input"),
    ("forward", "Forward"),
    ("backward", "Backward"),
    ("update", "Optimizer"),
)
COLUMN_KEYS = tuple(key for key, _ in COLUMNS)
MOVES_PER_COLUMN = 2  # DataParallel's forward: the replicate, then the gather; FSDP's backward: gather, reduce-scatter

# How a move runs between the lanes it involves:
HUB = "hub"  # some lanes send into it, others receive from it (scatter, replicate, gather, a broadcast)
ALL = "all"  # a collective: every lane hands its bytes in and gets a result back (all-reduce, all-gather)
NEXT = "next"  # point to point, each lane to the next (a pipeline's activations)
BACK = "back"  # point to point, each lane to the one before (a pipeline's gradients)
SHAPES = (HUB, ALL, NEXT, BACK)


@dataclass(frozen=True)
class Cell:
    """What one device holds or does in one part of the step: a line or two, short enough for a narrow column."""

    lines: tuple[str, ...]
    idle: bool = False  # nothing to do in this part of the step: drawn faint
    hover: str = ""  # the longer words, on hover
    # Fewer words for a box with room for fewer lines (many devices on a projector), every number of `lines` kept:
    # None, the lines themselves (dpviz.figures.presenting_boxes joins them where the box is wide enough)
    brief: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Arrow:
    """One kind of move in one column: its name, the legend's kind that carries it (its colour in every engine's
    every view, dpviz.trace.legend), and per lane the bytes it sent and received (a lane absent from both takes
    no part)."""

    column: str
    name: str
    kind: str
    shape: str
    sent: dict[int, int] = field(default_factory=dict)
    received: dict[int, int] = field(default_factory=dict)
    hover: str = ""

    def __post_init__(self) -> None:
        if self.column not in COLUMN_KEYS:
            raise ValueError(f"column {self.column!r} is not one of {', '.join(COLUMN_KEYS)}")
        if self.shape not in SHAPES:
            raise ValueError(f"shape {self.shape!r} is not one of {', '.join(SHAPES)}")
        if self.kind not in KINDS:
            raise ValueError(f"kind {self.kind!r} is not one of the legend's: {', '.join(KINDS)}")

    @property
    def lanes(self) -> list[int]:
        """The lanes that take part, top to bottom."""
        return sorted(set(self.sent) | set(self.received))


@dataclass(frozen=True)
class OneStep:
    """One step of one run: the lanes' names, a cell per lane and column, the moves, and the figure's words."""

    title: str
    lanes: tuple[str, ...]
    lane_ids: tuple[int, ...]
    cells: dict[tuple[int, str], Cell]  # (lane id, column key) -> what it holds or does there
    arrows: tuple[Arrow, ...]
    notes: tuple[str, ...] = ()
    failed: str | None = None  # the column the step failed in, when it did
    failed_lanes: tuple[int, ...] | None = None  # the lanes that failed there, when the engine knows; None: every lane

    def __post_init__(self) -> None:
        for column in COLUMN_KEYS:
            moves = [a for a in self.arrows if a.column == column]
            if len(moves) > MOVES_PER_COLUMN:
                raise ValueError(f"column {column!r} has {len(moves)} moves; one step draws at most {MOVES_PER_COLUMN}")

    def moves_in(self, column: str) -> list[Arrow]:
        return [a for a in self.arrows if a.column == column]


def idle(why: str = "") -> Cell:
    """A device with nothing to do in this part of the step."""
    return Cell(("—",), idle=True, hover=why)


def stopped(cells: dict[tuple[int, str], Cell], failed: str | None) -> dict[tuple[int, str], Cell]:
    """`cells` with every column after the one a failed step stopped in left empty: nothing after it ran."""
    if failed is None:
        return cells
    after = COLUMN_KEYS[COLUMN_KEYS.index(failed) + 1:]
    return {key: idle("the step stopped before this") if key[1] in after else cell for key, cell in cells.items()}


def step_heading(trace, step: int) -> str:
    """'Step 3 of 4, the last whole step': the step a title names, and why the page opened on it when it did, in the
    same words for every engine."""
    reason = opening_reason(trace, step)
    return numbered(step, batches_planned(trace), trace.spec.unit).capitalize() + (f", {reason}" if reason else "")


def bytes_note(trace, step: int, what: str) -> str:
    """'bytes in step 3: the tensors copied': One step counts one step's bytes (Compare counts a mean over the run's
    steps, and what a ring sends)."""
    return f"bytes in {trace.spec.unit} {counted(step)}: {what}"


def short_bytes(n: float) -> str:
    """'648 B', '2.0 KiB', '45 MiB': two significant figures, for a narrow box (the hover keeps every digit)."""
    text = human_bytes(n)
    number, unit = text.rsplit(" ", 1)
    if unit == "B":
        return text
    value = float(number.replace(",", ""))
    return f"{value:.1f} {unit}" if value < 10 else f"{value:,.0f} {unit}"


def update_cell(trace, lane: int, what: str, stepped: int | None, state: int | None, moves: str = "") -> Cell:
    """The Optimizer column, in the same words for every engine: the optimizer's step, the bytes of parameters it
    steps (`what`, in words, on hover), the bytes of optimizer state it keeps (None: the trace does not say), and
    what it moves after (`moves`, whose bytes its arrow gives; '': nothing moves)."""
    name, optimizer = trace.vocabulary.lane_name(lane), optimizer_label(trace.config)
    lines = [f"{optimizer} step", f"on {short_bytes(stepped)}" if stepped is not None else what]
    if state is not None:
        lines.append(f"state {short_bytes(state)}" if state else "no state")
    brief = [f"{optimizer} on {short_bytes(stepped)}" if stepped is not None else f"{optimizer} step"] + lines[2:]
    hover = (f"{name} steps {what}" + (f" ({human_bytes(stepped)})" if stepped is not None else "")
             + (f" and keeps {human_bytes(state)} of {optimizer}'s state" if state else
                f"; {optimizer} keeps no state" if state == 0 else "")
             + f"; {moves or 'nothing moves'}")
    return Cell(tuple(lines), hover=hover, brief=tuple(brief))


def optimizer_label(config) -> str:
    """'SGD', 'Adam': the optimizer a training run steps, as torch names it."""
    return {"sgd": "SGD", "adam": "Adam"}.get(config.optimizer, str(config.optimizer))


def failed_column(trace, step: int, columns: dict[str, str]) -> str | None:
    """The column a failed step stopped in: that of the last span the step recorded (`columns` maps a phase to
    its column); None when the step did not fail."""
    if trace.failure is None or trace.failure.batch != step:
        return None
    spans = [s for s in trace.spans_of(step) if s.phase in columns]
    return columns[max(spans, key=lambda s: s.end).phase] if spans else "input"
