"""A host as a class meets it: a memory cgroup of a hosted tier's size, and torch's libraries not yet in the page cache.

    forget_torch_pages()          # torch's shared libraries out of the page cache: the next reader is charged for them
    group = Cgroup(690)           # a child memory cgroup of 690 MB (v1 memory hierarchy, else v2; 0: no limit)
    ... start a process with `echo $$ > group.folder/cgroup.procs && exec ...`
    group.oom_kills(), group.peak_mb(), group.remove()

Used by bench/bench_class.py and tests/browser/test_browser_class.py. A cgroup charges a file's pages to the
first group that reads them, so on a machine that has run torch before, a new cgroup would not pay for torch's
libraries that a freshly started host pays for; dropping them first makes the cgroup pay as a new host does.
Needs root (as in a container here).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

MB = 10**6


def writable() -> bool:
    """Whether a child memory cgroup can be made here."""
    v1 = Path("/sys/fs/cgroup/memory")
    return os.access(v1 if v1.is_dir() else Path("/sys/fs/cgroup"), os.W_OK)


def forget_torch_pages() -> int:
    """Drop torch's shared libraries from the page cache, as on a host that has just started; bytes of files."""
    import importlib.util

    total = 0
    for path in Path(importlib.util.find_spec("torch").origin).parent.rglob("*.so*"):
        with open(path, "rb") as handle:
            os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            total += path.stat().st_size
    return total


class Cgroup:
    """A memory cgroup for the server (v1 memory hierarchy, else v2), with `limit_mb` (0: none)."""

    def __init__(self, limit_mb: int):
        v1 = Path("/sys/fs/cgroup/memory")
        self.v1 = v1.is_dir()
        self.folder = (v1 if self.v1 else Path("/sys/fs/cgroup")) / f"dpviz-class-{os.getpid()}"
        self.folder.mkdir()
        if limit_mb:
            name = "memory.limit_in_bytes" if self.v1 else "memory.max"
            (self.folder / name).write_text(str(limit_mb * MB))

    def oom_kills(self) -> int:
        text = (self.folder / ("memory.oom_control" if self.v1 else "memory.events")).read_text()
        return next((int(line.split()[1]) for line in text.splitlines() if line.startswith("oom_kill ")), 0)

    def peak_mb(self) -> float:
        return int((self.folder / ("memory.max_usage_in_bytes" if self.v1 else "memory.peak")).read_text()) / MB

    def remove(self) -> None:
        for _ in range(50):
            try:
                self.folder.rmdir()
                return
            except OSError:  # its last processes are still leaving
                time.sleep(0.1)


