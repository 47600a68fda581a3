"""Values read from a trace file, each checked against what a real run can produce.

Every reader raises TraceError with one sentence naming the field, the allowed range and (cut short)
the value found. Strings are capped and must be valid UTF-8; numbers lie within the limits below, so
that a trace that loads draws every view.
"""
from __future__ import annotations

from typing import Any

from dpviz.config import LIMITS

class TraceError(ValueError):
    """A trace file is unreadable or inconsistent; the message says what and where."""


BACKEND_NAMES = ("cuda", "simulated", "cpu")  # cpu: DDP ranks on the CPU (gloo)
MEMORY_KINDS = ("computed", "measured")

# Strings: at most this many characters each. A message is what Python printed (a traceback is a
# few thousand characters); the others are names dpviz or torch make, a few dozen characters long.
MAX_TEXT = 20_000  # characters of an error message or warning kept from a file
MAX_LANE_NAME = 200  # "cuda:3 NVIDIA H200", "simulated device 3"
MAX_THREAD_NAME = 100  # "Thread-149998 (worker)", "MainThread"
MAX_TORCH_VERSION = 64  # "2.13.0+cu128"
MAX_ARGUMENT_TEXT = 100  # a path ("batch['weight']", "scale=") or a kind ("list of int")
MAX_NAME = 100  # a warning's category or an exception's type: a Python class name
MAX_SETTING_TEXT = 32  # a config value that is a word: a model, an input form, a backend

# Numbers: what a real run can produce, with room to spare.
MAX_SECONDS = 7 * 24 * 3600  # a span's start and end: a week, where a largest run takes minutes
MAX_MEMORY_BYTES = 2**48  # 256 TiB, past any device's memory; sums of samples stay far inside int64
MAX_DEVICES = LIMITS["gpus"][1]
MAX_ROWS = LIMITS["data_size"][1]  # rows of a batch or a chunk, and the largest dimension of a shape
MAX_DIMS = 8  # a shape's dimensions: dpviz's models take at most 4 (a batch of images)
MAX_MACHINE_GPUS = 1024  # CUDA devices of the recording machine: more than one machine has
MAX_WARNINGS = 16  # distinct warnings of a run: dpviz's models raise one at most
MAX_ARGUMENT_PARTS = 64  # arguments (or tensors inside one) a replica receives: dpviz's forms pass two, a user's batch more
MAX_LOSS = 1e12  # a loss sample's magnitude: dpviz's losses on random data are near 1
MAX_LOSS_SAMPLES = 3  # losses are sampled for the first and the last batch
# Groups a run's spans are of (DDP's gradient buckets, FSDP's sharded modules): at most one per parameter, and
# dpviz's models have a few dozen at most.
MAX_GROUPS = 64
MAX_MICROBATCHES = 64  # a pipeline's microbatches per step (its option's limit)
SHOWN = 40  # characters of an offending value quoted in an error message


def first_line(error: Exception) -> str:
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return text[:120].rstrip(".")


def shown(value: Any) -> str:
    """A value as an error message quotes it: short, on one line, any lone surrogate escaped."""
    if isinstance(value, (list, dict)):
        return f"a {type(value).__name__} of {len(value):,} items"
    text = repr(value[:SHOWN + 1] if isinstance(value, str) else value)
    return text if len(text) <= SHOWN else text[:SHOWN] + "…"


def typed(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        name = " or ".join(k.__name__ for k in kind) if isinstance(kind, tuple) else kind.__name__
        raise TraceError(f"{where} should be {name}, got {type(value).__name__}.")
    return value


def whole(value: Any, where: str, low: int, high: int) -> int:
    """A whole number from low to high."""
    typed(value, int, where)
    if not low <= value <= high:
        raise TraceError(f"{where} must be between {low:,} and {high:,}, got {shown(value)}.")
    return value


def optional_whole(value: Any, where: str, low: int, high: int) -> int | None:
    return None if value is None else whole(value, where, low, high)


def wholes(value: Any, where: str, low: int, high: int) -> list[int]:
    """A list of whole numbers from low to high."""
    typed(value, list, where)
    if not set(map(type, value)) <= {int}:  # at C speed: a batch can hold 1,000,000 rows
        kind = next(type(item).__name__ for item in value if type(item) is not int)
        raise TraceError(f"{where} should hold whole numbers, got {kind}.")
    if value and not low <= min(value) <= max(value) <= high:
        bad = next(item for item in value if not low <= item <= high)
        raise TraceError(f"{where} must hold numbers between {low:,} and {high:,}, got {shown(bad)}.")
    return value


def shape_of(value: Any, where: str, known: dict[tuple, list[int]]) -> list[int]:
    """A tensor's shape: at most MAX_DIMS sizes from 1 to MAX_ROWS ([] for a 0-dim tensor, a plain value
    or a failed batch's missing output). Equal shapes share one list, as the recorder's do, so 150,000
    spans do not hold 150,000 copies."""
    if type(value) is list and len(value) <= MAX_DIMS and all(type(n) is int for n in value):
        shared = known.get(tuple(value))
        if shared is not None:
            return shared
    if len(typed(value, list, where)) > MAX_DIMS:
        raise TraceError(f"{where} has {len(value):,} dimensions; tensors here have at most {MAX_DIMS}.")
    wholes(value, where, 1, MAX_ROWS)
    return known.setdefault(tuple(value), value)


def text_of(value: Any, where: str, most: int = MAX_TEXT) -> str:
    """A string of at most `most` characters that is valid UTF-8 (JSON's \\ud800 makes a lone surrogate)."""
    typed(value, str, where)
    if len(value) > most:
        raise TraceError(f"{where} is {len(value):,} characters long; at most {most:,} are allowed.")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise TraceError(f"{where} holds a lone surrogate ({shown(value[error.start])}); text must be valid UTF-8.") from None
    return value


def choice_of(value: Any, where: str, choices: tuple[str, ...]) -> str:
    """One of `choices`, as the constant itself: 190,000 spans share one "forward"."""
    for choice in choices:
        if value == choice and type(value) is str:
            return choice
    raise TraceError(f"{where} must be one of {', '.join(choices)}, got {shown(value)}.")


def number(value: Any, where: str, low: float, high: float) -> float:
    """A finite number from low to high."""
    typed(value, (int, float), where)
    if not low <= value <= high:  # also false for NaN
        raise TraceError(f"{where} must be a number between {low:,g} and {high:,g}, got {shown(value)}.")
    return value


def mapping(value: Any, where: str) -> dict:
    return typed(value, dict, where)


def sequence(value: Any, where: str, most: int | None = None) -> list:
    typed(value, list, where)
    if most is not None and len(value) > most:
        raise TraceError(f"{where} holds {len(value):,} items; a trace holds at most {most:,}.")
    return value
