"""The memory every session's runs share, for the whole server, and the queue that shares it out.

    BUDGET.fits_alone(price)                         # whether a run of that price could ever run on this host
    with BUDGET.hold(price, seconds, waiting):       # waits its turn (first come, first served), then holds it
        ...                                          # the run; leaving the block (or an exception) gives it back

A hosted page is one process for every visitor, so the budget is one object for the whole server. Every run
happens in processes of its own (dpviz.engines.apart), priced before it starts (dpviz.page.run_costs). A run
starts when its price fits in the room left: the host's memory limit (dpviz.host_memory: its cgroup's, else the
machine's), less what the server, the forkserver and the resource tracker hold now (measured), less the prices of
the runs in flight, less some headroom. When it does not fit, the least recently shown runs the sessions keep are
let go first (`make_room`: a session that shows one again records it again); then it waits, told after every
change its place and about how long. A run that could not fit even alone on this host is refused at once.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from typing import Callable, Iterator

from dpviz.host_memory import host_limit_bytes, pss_bytes, rss_bytes
from dpviz.page import run_costs

PAGE_MOST = 8  # ranks one page run may ask for: more lanes than a chart can show side by side


class NeverFits(Exception):
    """A run whose price is more than this host has room for even with nothing else running."""


@dataclasses.dataclass(frozen=True)
class Place:
    """Where a waiting run stands: runs ahead of it (running or waiting), and about how many seconds until it starts."""

    ahead: int
    seconds: float


def measured_now(size: Callable[[int], int] = pss_bytes) -> int:
    """What the server, the forkserver and the resource tracker hold now (proportional set sizes); the
    forkserver counted as when alone, since the pages it shares with runs are in their prices. With
    `size=rss_bytes`, a quick upper bound of the same."""
    from dpviz.engines.processes import forkserver_pid

    measured = run_costs.measured_floor()
    forkserver = forkserver_pid()
    held = size(os.getpid()) + run_costs.TRACKER_BYTES
    return held + max(size(forkserver) if forkserver else 0, measured["forkserver"])


def at_most_now() -> int:
    """An upper bound of measured_now(), read in microseconds: resident sets count shared pages whole."""
    return measured_now(rss_bytes)


class MemoryBudget:
    """Bytes held by runs in flight, and the runs waiting for theirs, first come, first served."""

    def __init__(self, limit: Callable[[], int] = host_limit_bytes, held_now: Callable[[], int] = measured_now,
                 floor: Callable[[], int] = run_costs.floor):
        self._limit, self._held_now, self._floor = limit, held_now, floor
        self._changed = threading.Condition()
        self._queue: list[tuple[object, float]] = []  # (ticket, the run's expected seconds)
        self._running: dict[object, tuple[float, float]] = {}  # ticket -> (started, expected seconds)
        self.held = 0
        self._kept: dict[object, int] = {}  # key -> bytes a process kept between runs holds (dpviz.page.warm_runs)
        self.pace = 1.0  # how much longer runs take here than alone on a quiet host (learned as runs end)

    def room(self) -> int:
        """Bytes a further run may take now."""
        return self._limit() - self._held_now() - self.held - self.kept() - run_costs.HEADROOM_BYTES

    def keep(self, key: object, price: int) -> None:
        """Hold `price` bytes for `key` (a process kept between runs) until `let_go(key)`."""
        with self._changed:
            self._kept[key] = price

    def let_go(self, key: object) -> None:
        """Give back what `key` held, if anything; a run waiting for room looks again."""
        with self._changed:
            if self._kept.pop(key, None) is not None:
                self._changed.notify_all()

    def kept(self) -> int:
        """Bytes held by processes kept between runs."""
        with self._changed:
            return sum(self._kept.values())

    def room_alone(self) -> int:
        """Bytes a run may take when nothing else runs and nothing is kept."""
        return self._limit() - self._floor()

    def fits_alone(self, price: int) -> bool:
        """Whether a run of `price` bytes fits this host when nothing else runs and nothing is kept."""
        return price <= self.room_alone()

    @contextlib.contextmanager
    def hold(self, price: int, seconds: float = 1.0, waiting: Callable[[Place], None] | None = None,
             make_room: Callable[[], bool] | None = None, poll_s: float = 0.25) -> Iterator[None]:
        """Hold `price` bytes for the block's run once they fit. While it waits, `waiting(place)` is called at
        least every `poll_s` seconds: an exception from it (the session ended) leaves the queue. `make_room()`
        lets go of something kept (True if it did) before a run that does not fit waits. NeverFits when the run
        could not fit even alone."""
        if not self.fits_alone(price):
            raise NeverFits(price)
        ticket = object()
        with self._changed:
            self._queue.append((ticket, seconds))
        try:
            while not self._granted(ticket, price, seconds, make_room):
                if waiting is not None:
                    waiting(self._place(ticket))
                with self._changed:
                    self._changed.wait(timeout=poll_s)
            yield
        finally:
            with self._changed:
                self._queue = [(t, s) for t, s in self._queue if t is not ticket]
                if ticket in self._running:
                    started, expected = self._running.pop(ticket)
                    self.held -= price
                    # Alone on a quiet host a run takes `expected`; beside a class's drawing, longer: the next
                    # estimates follow what the last runs took (a run of a few ms counted as 50 ms, so that its
                    # noise does not swing them).
                    took = time.monotonic() - started
                    self.pace = 0.7 * self.pace + 0.3 * min(50.0, max(1.0, took / max(expected, 0.05)))
                self._changed.notify_all()

    def _granted(self, ticket: object, price: int, seconds: float, make_room: Callable[[], bool] | None) -> bool:
        with self._changed:
            if self._queue[0][0] is not ticket:
                return False
            alone = not self._running
        # The quick bound first: when even it leaves room, the slower measurement would too.
        fits = (price <= self._limit() - at_most_now() - self.held - self.kept() - run_costs.HEADROOM_BYTES
                or price <= self.room())
        while not fits and make_room is not None and make_room():
            fits = price <= self.room()
        if not (fits or alone):
            return False
        with self._changed:  # alone, it starts even when what the server holds says no: it fits the host (fits_alone)
            self._queue.pop(0)
            self._running[ticket] = (time.monotonic(), seconds)
            self.held += price
            self._changed.notify_all()
        return True

    def _place(self, ticket: object) -> Place:
        """The runs ahead of `ticket`, and about how long until it starts: what the runs in flight have left
        and what the runs ahead of it take, at the pace runs have gone here lately."""
        with self._changed:
            now = time.monotonic()
            left = sum(max(0.0, expected * self.pace - (now - started)) for started, expected in self._running.values())
            ahead = [s for t, s in self._queue[:next((i for i, (t, _) in enumerate(self._queue) if t is ticket), 0)]]
            return Place(ahead=len(self._running) + len(ahead), seconds=left + sum(ahead) * self.pace)


BUDGET = MemoryBudget()  # the server's one budget: every session's runs draw on it
