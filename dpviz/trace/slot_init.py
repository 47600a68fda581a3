"""A faster __init__ for a frozen, slotted dataclass, the same in every way a caller can see.

    Span = with_slot_init(Span)   # after @dataclass(frozen=True, slots=True)

A frozen dataclass's own __init__ sets each field through `object.__setattr__(self, name, value)`: a global
look-up, an attribute look-up and a generic call per field, about half of building a Span, and a large run
builds hundreds of thousands of them (the recorder, and again the page when a trace comes back from its
process). The __init__ made here takes the same parameters, in the same order, with the same defaults, and
writes each value straight into its slot through the slot's own descriptor; the instance stays frozen (its
__setattr__ still raises). tests/test_slot_init.py holds both against each other.
"""
from __future__ import annotations

import dataclasses
from typing import TypeVar

T = TypeVar("T")


def with_slot_init(cls: type[T]) -> type[T]:
    """`cls` with its __init__ replaced by one that writes its slots directly (see the module's docstring)."""
    fields = [f for f in dataclasses.fields(cls) if f.init]
    if (not fields or hasattr(cls, "__post_init__") or not hasattr(cls, "__slots__") or len(fields) != len(dataclasses.fields(cls))
            or any(f.default_factory is not dataclasses.MISSING or f.kw_only for f in fields)):
        raise TypeError(f"{cls.__name__}: only a slotted dataclass of plain positional fields is handled")
    names: dict = {}
    parameters, body = [], []
    for i, f in enumerate(fields):
        names[f"__set{i}"] = getattr(cls, f.name).__set__  # the slot's member descriptor
        if f.default is dataclasses.MISSING:
            parameters.append(f.name)
        else:
            names[f"__default{i}"] = f.default
            parameters.append(f"{f.name}=__default{i}")
        body.append(f"    __set{i}(self, {f.name})")
    source = f"def __init__(self, {', '.join(parameters)}):\n" + "\n".join(body) + "\n"
    exec(source, names)  # noqa: S102 - the source is built from the class's own field names, nothing else
    init = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__, init.__annotations__ = cls.__init__.__doc__, dict(cls.__init__.__annotations__)
    cls.__init__ = init
    return cls
