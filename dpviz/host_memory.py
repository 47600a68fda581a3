"""How much memory this host gives the page, and how much a process tree holds: read from Linux itself.

    host_limit_bytes()        # the cgroup's memory limit where there is one (v2 memory.max, v1
                              # memory.limit_in_bytes, the tightest along the path), else the machine's memory
    pss_bytes(pid)            # proportional set size: shared pages split between the processes sharing them
    tree(pid)                 # pid and every process below it

A hosted page (Streamlit Community Cloud and the like) runs in a container whose cgroup says what it may
use; a laptop has no such limit, and then the machine's memory is the bound.
"""
from __future__ import annotations

import os
from pathlib import Path

UNLIMITED = 2**60  # cgroup v1 writes "no limit" as a number near 2**63


def _meminfo_total() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return UNLIMITED


def _mounts() -> list[tuple[str, str, str, str]]:
    """(root, mount point, file system type, super options) of each cgroup mount."""
    found = []
    with open("/proc/self/mountinfo") as mountinfo:
        for line in mountinfo:
            fields = line.split()
            dash = fields.index("-")
            kind = fields[dash + 1]
            if kind in ("cgroup", "cgroup2"):
                found.append((fields[3], fields[4], kind, fields[dash + 3]))
    return found


def _cgroup_paths() -> dict[str, str]:
    """The process's cgroup path per hierarchy: "memory" (v1) or "" (v2)."""
    paths = {}
    with open("/proc/self/cgroup") as cgroup:
        for line in cgroup:
            number, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                paths[controller] = path
    return paths


def _folder(mount: str, root: str, path: str) -> Path:
    """The cgroup at `path` as seen under the hierarchy mounted at `mount` (whose root is `root`); the mount
    itself where that folder is not visible (a container's namespace shows its own cgroup as the root)."""
    relative = os.path.relpath(path, root) if path.startswith(root) else path.lstrip("/")
    folder = Path(mount) / relative
    return folder if relative not in (".", "") and folder.is_dir() else Path(mount)


def _limits_along(mount: str, root: str, path: str, name: str) -> list[int]:
    """The limits in file `name` of the cgroup at `path` and its parents, as seen under `mount`."""
    folder = _folder(mount, root, path)
    limits = []
    while True:
        try:
            text = (folder / name).read_text().strip()
            if text != "max":
                limits.append(int(text))
        except (OSError, ValueError):
            pass
        if folder == Path(mount) or folder.parent == folder:
            return limits
        folder = folder.parent


def cgroup_limit_bytes() -> int | None:
    """The tightest memory limit of this process's cgroup and its parents, or None when none is set."""
    try:
        paths, mounts = _cgroup_paths(), _mounts()
    except OSError:
        return None
    limits = []
    for root, mount, kind, options in mounts:
        if kind == "cgroup2" and "" in paths:
            limits += _limits_along(mount, root, paths[""], "memory.max")
        elif kind == "cgroup" and "memory" in options.split(",") and "memory" in paths:
            limits += _limits_along(mount, root, paths["memory"], "memory.limit_in_bytes")
    limits = [limit for limit in limits if limit < UNLIMITED]
    return min(limits) if limits else None


def cgroup_usage_bytes() -> int | None:
    """What this process's own cgroup is charged now (page cache included), or None outside a limited cgroup."""
    try:
        paths, mounts = _cgroup_paths(), _mounts()
    except OSError:
        return None
    for root, mount, kind, options in mounts:
        if kind == "cgroup2" and "" in paths:
            name, path = "memory.current", paths[""]
        elif kind == "cgroup" and "memory" in options.split(",") and "memory" in paths:
            name, path = "memory.usage_in_bytes", paths["memory"]
        else:
            continue
        folder = _folder(mount, root, path)
        try:
            return int((folder / name).read_text())
        except (OSError, ValueError):
            return None
    return None


def host_limit_bytes() -> int:
    """What this server's processes may hold together: its cgroup's limit, else the machine's memory."""
    total = _meminfo_total()
    limit = cgroup_limit_bytes()
    return min(total, limit) if limit is not None else total


def pss_bytes(pid: int) -> int:
    """The process's proportional set size (0 once it has gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            return next((int(line.split()[1]) * 1024 for line in rollup if line.startswith("Pss:")), 0)
    except OSError:
        return 0


def rss_bytes(pid: int) -> int:
    """The process's resident set size (0 once it has gone): at least its PSS, and read in microseconds where
    the PSS takes milliseconds."""
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def parent(pid: int) -> int:
    """The process's parent id (0 once it has gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def tree(root: int) -> list[int]:
    """`root` and all its descendants, from the parent ids in /proc/<pid>/stat."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [root], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def session(leader: int) -> list[int]:
    """Every process in the session `leader` leads: all a process started in a session of its own started, wherever
    it hangs now (a process whose parent exited is reparented to init, out of `tree`, but keeps its session)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[3]) == leader:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return found
