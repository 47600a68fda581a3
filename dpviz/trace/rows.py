"""The dataset rows a batch holds, as 4-byte integers: what a trace of a million rows keeps, 4 MB instead of 40.

    rows = Rows([4, 0, 7])      # from any sequence of row indices (a list, a tensor's bytes through from_int64)
    rows[1], rows[0:2], len(rows), list(rows), rows == [4, 0, 7]

A list of Python ints costs about 36 bytes a row (an object each, and a pointer); a batch's rows are read as
a sequence and never changed, so they are kept in an `array` and read back as ints. Slices are lists, and a
Rows equals any sequence of the same ints, so readers that took a list take this unchanged.
"""
from __future__ import annotations

from array import array
from typing import Iterable, Iterator, overload

_CODE = "i"  # 4 bytes: every row index is below the data-size limit (16,777,216 numbers), so below 2**31


class Rows:
    """An immutable sequence of row indices, held compactly."""

    __slots__ = ("_values",)

    def __init__(self, values: Iterable[int] = ()):
        self._values = values._values if isinstance(values, Rows) else array(_CODE, values)

    @classmethod
    def from_int64(cls, raw: bytes) -> "Rows":
        """From the bytes of int64 indices (a tensor's `.numpy().tobytes()`), without an int object per row."""
        rows = cls()
        rows._values = array(_CODE, array("q", raw))
        return rows

    def __len__(self) -> int:
        return len(self._values)

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index):
        found = self._values[index]
        return found.tolist() if isinstance(index, slice) else found

    def __iter__(self) -> Iterator[int]:
        return iter(self._values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Rows):
            return self._values == other._values
        try:
            return len(other) == len(self._values) and all(a == b for a, b in zip(self._values, other))  # type: ignore[arg-type]
        except TypeError:
            return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # as a list's: equal to lists, so not hashable

    def tolist(self) -> list[int]:
        return self._values.tolist()

    def __repr__(self) -> str:
        return f"Rows({self._values.tolist()!r})"

    def __reduce__(self):
        return Rows._from_array, (self._values,)

    @staticmethod
    def _from_array(values: array) -> "Rows":
        rows = Rows()
        rows._values = values
        return rows

    def __deepcopy__(self, memo) -> "Rows":
        return self  # immutable
