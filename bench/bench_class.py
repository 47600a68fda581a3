"""A class on one hosted link: N visitors open every kind of page at once on one server inside a memory limit.

    .venv/bin/python bench/bench_class.py                     # 30 visitors, a 690 MB memory cgroup
    .venv/bin/python bench/bench_class.py --limit-mb 1500     # a larger host
    .venv/bin/python bench/bench_class.py --limit-mb 0        # no limit (a cgroup still counts what is charged)

Needs Playwright and Chromium (as bench/bench_hosted.py, whose server it uses), and a writable cgroup v1 memory
hierarchy at /sys/fs/cgroup/memory (root in a container, as here) or a cgroup v2 one at /sys/fs/cgroup.

The host is made fresh first: torch's libraries are dropped from the page cache (posix_fadvise), so the cgroup is
charged for reading them, as a host that has just started is. Then one `streamlit run app.py` starts inside the
cgroup, and N Chromium pages (each its own context: its own session) open at once, spread over every kind of
page: DataParallel at its defaults and at 16 GPUs with 1,000,000 rows, DDP, ZeRO-1, FSDP with the transformer
(at 4 and 8 ranks), Both at 8, Memory of every engine, and every preset's link; visitors past the list open its
first links again. Sampled every 50 ms until every page has drawn its first chart and gone idle: the rank
processes alive at once. Printed: pages drawn, out-of-memory kills (memory.oom_control or memory.events), the
cgroup's peak charge, the most rank processes alive at once, p50 / p95 / max seconds from opening to each page's
first chart, and the processes left under the server a few seconds after every page has closed.
Results also go to bench/out/bench_class.json (bench/results.py), one part per limit.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from bench_hosted import CHROMIUM, CHROMIUM_ARGS, EXCEPTION, IDLE, SVG, Server  # noqa: E402
from fresh_host import Cgroup, forget_torch_pages  # noqa: E402
from results import save  # noqa: E402
from dpviz.host_memory import parent  # noqa: E402
from dpviz.presets import LINK_PRESETS  # noqa: E402

OUT = Path(__file__).with_name("out")
MB = 10**6
KINDS = [
    "/",
    "/?gpus=16&data_size=1000000&batch_size=256",
    "/?engine=ddp&gpus=4&train=true",
    "/?engine=zero1&gpus=4&train=true&optimizer=adam",
    "/?engine=fsdp&gpus=4&train=true&model=transformer",
    "/?engine=both&gpus=8&train=true",
    "/?engine=memory&gpus=4&train=true&optimizer=adam",
    "/?engine=fsdp&gpus=8&train=true&model=transformer&optimizer=adam",
]
LINKS = KINDS + [f"/?preset={name}" for name in LINK_PRESETS]


def links(count: int) -> list[str]:
    """`count` visitors' links: every kind of page and every preset, then the kinds again."""
    return [LINKS[i] if i < len(LINKS) else KINDS[(i - len(LINKS)) % len(KINDS)] for i in range(count)]


def members(group: Cgroup) -> list[int]:
    """Every process charged to the class's cgroup: the server and all it started, wherever they hang (the
    forkserver's second stage outlives its first and hangs off init, not the server, with every run under it)."""
    try:
        return [int(pid) for pid in (group.folder / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _forkservers(group: Cgroup) -> set[int]:
    return {pid for pid in members(group) if b"forkserver" in _cmdline(pid)}


def ranks_now(group: Cgroup) -> int:
    """Rank processes alive: below a forkserver, the children of each run's own process."""
    servers = _forkservers(group)
    return sum(1 for pid in members(group) if parent(parent(pid)) in servers)


def cpu_seconds(root: int, group: Cgroup) -> float:
    """CPU time the server's processes have used: the server's own, and each forkserver's with every run and rank
    it has reaped (their time is added to its children's once they end)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in {root, *_forkservers(group)}:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(fields[i]) for i in (11, 12, 13, 14)) / tick  # utime, stime, cutime, cstime
    return total


def left_over(root: int, group: Cgroup) -> list[int]:
    """The cgroup's processes other than the server, its forkserver and multiprocessing's resource tracker."""
    keep = {b"forkserver", b"resource_tracker"}
    return [pid for pid in members(group) if pid != root and not any(word in _cmdline(pid) for word in keep)]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def run_class(visitors: int, limit_mb: int, timeout_s: float) -> dict:
    forgotten = forget_torch_pages()
    group = Cgroup(limit_mb)
    results = [{"link": link} for link in links(visitors)]
    most_ranks, alive, left, server_cpu = [0], True, [], 0.0
    try:
        with Server(OUT / "class-server.log", cgroup=group.folder) as server:
            server.wait_healthy()
            root = server.process.pid
            stop = threading.Event()

            def sample() -> None:
                while not stop.is_set():
                    most_ranks[0] = max(most_ranks[0], ranks_now(group))
                    stop.wait(0.05)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                began = time.perf_counter()
                # Playwright's sync API belongs to one thread: the visitors open their pages one after the other
                # without waiting (commit); then every page is looked at in turn until each has drawn.
                contexts, pages = [], []
                for result in results:
                    context = browser.new_context(viewport={"width": 1400, "height": 900})
                    page = context.new_page()
                    page.goto(server.url + result["link"], wait_until="commit", timeout=int(timeout_s * 1000))
                    contexts.append(context)
                    pages.append(page)
                pending = list(range(len(pages)))
                deadline = time.perf_counter() + timeout_s
                while pending and time.perf_counter() < deadline:
                    for i in list(pending):
                        page, result = pages[i], results[i]
                        if "first_chart_s" not in result and page.locator(SVG).count():
                            result["first_chart_s"] = time.perf_counter() - began
                        if not page.locator(IDLE).count():
                            continue
                        if "first_chart_s" in result:
                            result["drawn"] = page.locator(EXCEPTION).count() == 0
                            pending.remove(i)
                        elif page.get_by_text("so it cannot run here").count():
                            # The page's one sentence for a run this host could never hold: its result, not a chart.
                            result["error"] = page.get_by_text("so it cannot run here").first.inner_text()[:300]
                            pending.remove(i)
                    pages[0].wait_for_timeout(100)
                for i in pending:
                    results[i]["error"] = f"no chart within {timeout_s:.0f} s"
                stop.set()
                sampler.join()
                server_cpu = cpu_seconds(root, group)
                for context in contexts:
                    context.close()
                browser.close()
            time.sleep(5.0)  # a closed tab's run and its processes end within a poll
            left = left_over(root, group)
            alive = server.process.poll() is None
    finally:
        oom, peak = group.oom_kills(), group.peak_mb()
        group.remove()
    seconds = [r["first_chart_s"] for r in results if "first_chart_s" in r]
    drawn = sum(1 for r in results if r.get("drawn"))
    row = {"visitors": visitors, "limit_mb": limit_mb or None, "drawn": drawn, "oom_kills": oom, "peak_charge_mb": peak,
           "most_ranks_at_once": most_ranks[0], "left_after": len(left), "server_alive": alive,
           "first_chart_s": {"p50": statistics.median(seconds) if seconds else None,
                             "p95": percentile(seconds, 0.95) if seconds else None,
                             "max": max(seconds) if seconds else None},
           "torch_libraries_dropped_mb": forgotten / MB, "server_cpu_s": server_cpu,
           "not_drawn": [f"{r['link']}: {r.get('error', 'an exception on the page')}" for r in results if not r.get("drawn")]}
    limit = f"a {limit_mb} MB cgroup" if limit_mb else "no limit"
    chart = row["first_chart_s"]
    print(f"{visitors} visitors at once, {limit}: {drawn} of {visitors} pages drawn, {oom} OOM kills, peak charge "
          f"{peak:.0f} MB, at most {most_ranks[0]} rank processes at once, first chart p50 {chart['p50'] or 0:.1f} s / "
          f"p95 {chart['p95'] or 0:.1f} s / max {chart['max'] or 0:.1f} s, {len(left)} processes left after every page "
          f"closed, server {'alive' if alive else 'DEAD'}; the server's processes used {server_cpu:.0f} CPU seconds", flush=True)
    for line in row["not_drawn"]:
        print("  not drawn:", line)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--visitors", type=int, default=30)
    parser.add_argument("--limit-mb", type=int, default=690, help="the server's memory cgroup limit (0: none)")
    parser.add_argument("--timeout-s", type=float, default=600.0, help="how long every page may take to draw")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    load_start = os.getloadavg()
    row = run_class(args.visitors, args.limit_mb, args.timeout_s)
    save("bench_class", f"visitors_{args.visitors}_{args.limit_mb or 'unlimited'}", row, load_start)


if __name__ == "__main__":
    main()
