"""The process table, read from /proc: what a test needs to check that every process a run started has ended."""
from __future__ import annotations

import signal
import time

from dpviz.host_memory import tree


def _stat(pid: int) -> list[str] | None:
    """A process's /proc stat fields after its name (state first), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def identity(pid: int) -> tuple[int, int] | None:
    """(pid, start time in clock ticks): a process, never a later one given the same number."""
    fields = _stat(pid)
    return None if fields is None else (pid, int(fields[19]))


def running(process: tuple[int, int]) -> bool:
    """Whether that very process still runs (a zombie has ended: it only waits to be reaped)."""
    fields = _stat(process[0])
    return fields is not None and fields[0] != "Z" and int(fields[19]) == process[1]


def descendants(pid: int) -> set[tuple[int, int]]:
    """Every process below `pid` in the process tree now, as identities."""
    return {process for process in map(identity, tree(pid)[1:]) if process is not None}


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as line:
            return line.read().replace(b"\0", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return ""


def comm(pid: int | str) -> str:
    """A process's name as `ps` shows it ('' once it is gone)."""
    try:
        with open(f"/proc/{pid}/comm") as name:
            return name.read().strip()
    except OSError:
        return ""


def threads(pid: int) -> int:
    fields = _stat(pid)
    return 0 if fields is None else int(fields[17])


def handles(pid: int, number: int) -> bool:
    """Whether the process has installed a handler for signal `number` (its SigCgt mask in /proc)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (number - 1) & 1)
    except (FileNotFoundError, ProcessLookupError):
        pass
    return False


def wait_for(condition, deadline: float, every: float = 0.01, seen: set | None = None, root: int | None = None) -> bool:
    """Poll `condition()` until it holds or `deadline` (time.monotonic) passes; while polling, add what runs
    below `root` to `seen`, so that no process that lived only between two looks at the end goes unseen."""
    while time.monotonic() < deadline:
        if seen is not None and root is not None:
            seen |= descendants(root)
        if condition():
            if seen is not None and root is not None:  # what the condition saw may have started after the look above
                seen |= descendants(root)
            return True
        time.sleep(every)
    return False


SIGNAL_NAMES = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "SIGINT", signal.SIGHUP: "SIGHUP"}
