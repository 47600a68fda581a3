"""One binary unit for every amount of bytes on a figure: its axis ticks, its titles, its totals and its notes.

    unit = byte_unit(largest)                           # the unit the figure's largest amount fills: "MiB"
    fig.add_trace(go.Bar(y=unit.scaled(sizes), ...))    # what an axis plots: amounts in that unit
    fig.update_yaxes(**unit.axis("sent per step"))      # titled "sent per step (MiB)", ticks 0, 5, 10, 15
    title = f"GPU 0 sends {unit.amount(gpu0)}"          # "14.4 MiB", the unit the ticks are read in

Plotted in bytes, plotly writes its own SI ticks ("15M") under a title in MiB: two units, one a factor of
1.05 off the other. Plotted in the title's unit, with plotly's exponents off, the ticks are plain numbers of it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

UNITS = (("B", 1), ("KiB", 1024), ("MiB", 1024**2), ("GiB", 1024**3))


@dataclass(frozen=True)
class ByteUnit:
    """The one unit a figure writes every amount in: ticks, totals, hovers and caption."""

    name: str  # "B", "KiB", "MiB" or "GiB"
    size: int  # bytes in one unit
    decimals: int  # enough for three significant digits at the figure's largest amount

    def number(self, n: float) -> str:
        """`n` bytes as a number in this unit, without the unit: "0.63"; "<0.01" for a sliver."""
        value = n / self.size
        text = f"{value:,.{self.decimals}f}"
        if n and float(text.replace(",", "")) == 0:
            return "<" + f"{10 ** -self.decimals:.{self.decimals}f}"
        return text

    def amount(self, n: float) -> str:
        """`n` bytes with this unit: "0.63 KiB"."""
        return f"{self.number(n)} {self.name}"

    def scaled(self, sizes: Iterable[float | None]) -> list[float | None]:
        """Amounts of bytes as an axis in this unit plots them."""
        return [None if n is None else n / self.size for n in sizes]

    def axis(self, what: str) -> dict[str, Any]:
        """An axis of amounts in this unit: titled "`what` (MiB)", its ticks plain numbers ("1,000", never "1k")."""
        return dict(title_text=f"{what} ({self.name})", exponentformat="none", separatethousands=True)


def byte_unit(top: float) -> ByteUnit:
    """The largest binary unit `top` bytes fill at least once, so the tallest bar reads 1 to 1,023."""
    name, size = UNITS[0]
    for bigger_name, bigger in UNITS[1:]:
        if top >= bigger:
            name, size = bigger_name, bigger
    value = top / size
    decimals = 0 if size == 1 or value >= 100 else 1 if value >= 10 else 2
    return ByteUnit(name, size, decimals)
