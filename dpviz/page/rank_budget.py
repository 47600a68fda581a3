"""The rank processes the page may run at once, for the whole server, and the queue that shares them.

    BUDGET.room()                                  # ranks this host has memory for, all sessions together
    with BUDGET.ranks(4, waiting):                 # waits its turn (first come, first served), then holds them
        ...                                        # the run; leaving the block (or an exception) gives them back

A hosted page is one process for every visitor, so the budget is one object for the whole server. Its size
comes from the host: its memory limit (dpviz.host_memory: the cgroup's, else the machine's), less what the
server holds now, the forkserver that starts the ranks and some headroom, divided by what a rank costs.
Both costs were measured by bench/bench_budget.py --costs (proportional set sizes: the pages a rank shares with
the forkserver are split between them). A session that would take more than is free waits, told after
every change how many runs are ahead of it; a session that ends while waiting (a tab closed, a setting
changed) leaves the queue, and one that ends while running gives its ranks back with its run.
"""
from __future__ import annotations

import contextlib
import os
import threading
from typing import Callable, Iterator

from dpviz.host_memory import cgroup_limit_bytes, cgroup_usage_bytes, host_limit_bytes, pss_bytes

MB = 10**6
# Measured by bench/bench_budget.py --costs (docs/speed.md, "Memory"): the forkserver with torch, torch.distributed
# and torch._dynamo imported, alone; what each further rank adds to the whole tree at the peak of a training run.
FORKSERVER_BYTES = 235 * MB
RANK_BYTES = 15 * MB  # 12 MB measured, and a quarter more: a rank of a larger model holds more
TRACKER_BYTES = 7 * MB  # multiprocessing's resource tracker
HEADROOM_BYTES = 40 * MB  # the sessions' traces and figures grow between two looks
PAGE_MOST = 8  # ranks one page run may ask for: more lanes than a chart can show side by side


def host_room(limit: int, server: int, forkserver_running: bool) -> int:
    """Ranks that fit beside a server holding `server` bytes on a host of `limit` bytes."""
    base = server + TRACKER_BYTES + HEADROOM_BYTES + (0 if forkserver_running else FORKSERVER_BYTES)
    return max(0, (limit - base) // RANK_BYTES)


def _forkserver() -> int | None:
    from multiprocessing import forkserver

    return forkserver._forkserver._forkserver_pid


def measured_room() -> int:
    """Ranks this server has room for now, counting its own size and its forkserver's as they are. In a
    memory cgroup, what the cgroup is charged (page cache of torch's libraries included, which a host's
    limit counts too) less the ranks' own share, where that is more than the processes' sizes say."""
    forkserver = _forkserver()
    server = pss_bytes(os.getpid())
    if forkserver is not None:  # counted as when alone: its pages are shared with the ranks, whose cost is RANK_BYTES
        server += max(pss_bytes(forkserver), FORKSERVER_BYTES)
    charged = cgroup_usage_bytes()
    if charged is not None and cgroup_limit_bytes() is not None:
        ranks = BUDGET.held if "BUDGET" in globals() else 0
        server = max(server, charged - ranks * RANK_BYTES - TRACKER_BYTES)
    return host_room(host_limit_bytes(), server, forkserver is not None)


class RankBudget:
    """Ranks held by runs in flight, and the sessions waiting for theirs, first come, first served."""

    def __init__(self, room: Callable[[], int] = measured_room):
        self._room = room
        self._changed = threading.Condition()
        self._queue: list[object] = []
        self.held = 0
        self._holders = 0

    def room(self) -> int:
        """Ranks this host has memory for, all runs together (measured again at each call)."""
        return self._room()

    @contextlib.contextmanager
    def ranks(self, wanted: int, waiting: Callable[[int, int], None] | None = None,
              poll_s: float = 0.25) -> Iterator[None]:
        """Hold `wanted` ranks for the block's run, once they fit beside the ranks other runs hold (a run
        alone on the server always starts: a host too small for its ranks slows, it does not stall). While
        it waits, `waiting(runs_ahead, ranks_held)` is called at least every `poll_s` seconds: an exception
        from it (the session ended) leaves the queue."""
        ticket = object()
        granted = 0
        with self._changed:
            self._queue.append(ticket)
        try:
            while True:
                with self._changed:
                    if self._queue[0] is ticket and (self._holders == 0 or self.held + wanted <= self._room()):
                        self._queue.remove(ticket)
                        self.held += wanted
                        self._holders += 1
                        granted = wanted
                        self._changed.notify_all()
                        break
                    ahead = self._queue.index(ticket) + self._holders
                if waiting is not None:
                    waiting(ahead, self.held)
                with self._changed:
                    self._changed.wait(timeout=poll_s)
            yield
        finally:
            with self._changed:
                if ticket in self._queue:
                    self._queue.remove(ticket)
                if granted:
                    self.held -= granted
                    self._holders -= 1
                self._changed.notify_all()


BUDGET = RankBudget()  # the server's one budget: every session's DDP runs draw on it
