"""with_slot_init's __init__ against the one @dataclass writes, on the same fields."""
from __future__ import annotations

import dataclasses
import inspect
import pickle

import pytest

from dpviz.trace.model import Span
from dpviz.trace.slot_init import with_slot_init


def _twins():
    """The same frozen slotted dataclass twice: as @dataclass leaves it, and with the slot __init__."""
    def make():
        @dataclasses.dataclass(frozen=True, slots=True)
        class Point:
            x: int
            y: str
            z: float | None = None
            w: list | None = None
        return Point
    return make(), with_slot_init(make())


CALLS = [((1, "a"), {}), ((1, "a", 2.5), {}), ((1,), {"y": "b", "w": [1]}), ((), {"x": 3, "y": "c", "z": None}),
         ((1, "a", 2.5, [2]), {})]
BAD_CALLS = [((), {}), ((1,), {}), ((1, "a", 2.5, [2], 5), {}), ((1, "a"), {"x": 2}), ((1, "a"), {"v": 0})]


@pytest.mark.parametrize("args, kwargs", CALLS)
def test_the_same_instances(args, kwargs):
    plain, fast = _twins()
    made, expected = fast(*args, **kwargs), plain(*args, **kwargs)
    assert dataclasses.astuple(made) == dataclasses.astuple(expected)
    assert repr(made).replace("Point", "") == repr(expected).replace("Point", "")
    assert dataclasses.replace(made, x=9) == fast(9, *dataclasses.astuple(made)[1:])


@pytest.mark.parametrize("args, kwargs", BAD_CALLS)
def test_the_same_errors(args, kwargs):
    plain, fast = _twins()
    with pytest.raises(TypeError) as expected:
        plain(*args, **kwargs)
    with pytest.raises(TypeError) as got:
        fast(*args, **kwargs)
    assert str(got.value).split("(", 1)[1] == str(expected.value).split("(", 1)[1]


def test_still_frozen_and_the_same_signature():
    plain, fast = _twins()
    point = fast(1, "a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 2  # type: ignore[misc]
    assert inspect.signature(fast) == inspect.signature(plain)
    assert not hasattr(point, "__dict__")


def test_span_is_built_by_it():
    fields = ("forward", 1, 0.5, 0.75, 3, 3, 32, 16, [16, 5], [16, 2], "replica worker 1", 4, None, 2)
    span = Span(*fields)
    assert Span.__init__.__qualname__ == "Span.__init__"
    assert dataclasses.astuple(span) == fields
    assert pickle.loads(pickle.dumps(span)) == span  # how a trace leaves its run's process
    assert Span("scatter", 2, 0.0, 1.0) == Span(phase="scatter", batch=2, start=0.0, end=1.0, lane=None, row_offset=0)


def test_refuses_what_it_cannot_copy():
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        x: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Factory:
        x: list = dataclasses.field(default_factory=list)

    for cls in (NoSlots, Factory):
        with pytest.raises(TypeError):
            with_slot_init(cls)
