"""Many visitors at once on one hosted server: the rank budget against the host's memory.

    .venv/bin/python bench/bench_budget.py                       # 10 sessions, engine=both&gpus=4&train=true
    .venv/bin/python bench/bench_budget.py --limit-mb 690        # the same inside a 690 MB memory cgroup
    .venv/bin/python bench/bench_budget.py --costs               # what the forkserver and each rank cost

Needs Playwright and Chromium, as bench/bench_hosted.py (whose server it uses); --limit-mb needs a
writable cgroup v1 memory hierarchy at /sys/fs/cgroup/memory (root in a container, as here).

(a) --costs: a fresh server per measurement, the link engine=ddp&gpus=W&train=true, and the peak of the
    proportional set size (PSS) summed over the server and every process under it, sampled every 50 ms:
    at W = 2 and W = 6 the difference over 4 is what each further rank costs; the forkserver's own PSS
    once the ranks have gone is what it costs alone. These are dpviz/page/rank_budget.py's RANK_BYTES and
    FORKSERVER_BYTES.
(b) sessions: one server, N browser pages opening the same link at once. Sampled every 50 ms until every
    page has drawn its Compare chart and gone idle: the tree's PSS and the rank processes alive. Then every
    page closes, and after a few seconds no rank process may be left. With --limit-mb the server runs in a
    memory cgroup of that size, so its budget is sized from that limit, and going past it is an out-of-memory
    kill, not a number.
Results also go to bench/out/bench_budget.json (bench/results.py), one part per mode.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_hosted import CHROMIUM, CHROMIUM_ARGS, IDLE, SVG, Server  # noqa: E402
from results import save  # noqa: E402
from dpviz.host_memory import pss_bytes, tree  # noqa: E402
from dpviz.page.rank_budget import FORKSERVER_BYTES, HEADROOM_BYTES, RANK_BYTES, TRACKER_BYTES  # noqa: E402

OUT = Path(__file__).with_name("out")
LINK = "/?engine=both&gpus={gpus}&train=true"
MB = 10**6


def is_rank(pid: int, root: int) -> bool:
    """A rank: a process under the forkserver (the forkserver's own command line names it, and so do its children)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as line:
            forked = b"forkserver" in line.read()
        with open(f"/proc/{pid}/stat") as stat:
            parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        with open(f"/proc/{parent}/cmdline", "rb") as line:
            return forked and b"forkserver" in line.read()
    except OSError:
        return False


class Sampler:
    """The server tree's PSS and its rank processes, every 50 ms, in a thread."""

    def __init__(self, root: int):
        self.root, self.peak, self.ranks, self.stop = root, 0, 0, threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            pids = tree(self.root)
            self.peak = max(self.peak, sum(pss_bytes(p) for p in pids))
            self.ranks = max(self.ranks, sum(is_rank(p, self.root) for p in pids))
            self.stop.wait(0.05)

    def __enter__(self) -> "Sampler":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


def peak_of(browser, link: str) -> tuple[float, float]:
    """(peak PSS of the tree during the run, the forkserver's PSS after it), in MB."""
    with Server(OUT / "budget-server.log") as server:
        server.wait_healthy()
        with Sampler(server.process.pid) as sampler:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(server.url + link)
            page.wait_for_selector(SVG, timeout=300_000)
            page.wait_for_selector(IDLE, timeout=300_000)
        time.sleep(1.0)
        forkserver = [p for p in tree(server.process.pid)[1:] if b"forkserver" in Path(f"/proc/{p}/cmdline").read_bytes()]
        page.close()
        return sampler.peak / MB, (pss_bytes(forkserver[0]) / MB if forkserver else 0.0)


def costs(browser) -> dict:
    low, forkserver = peak_of(browser, "/?engine=ddp&gpus=2&train=true")
    high, _ = peak_of(browser, "/?engine=ddp&gpus=6&train=true")
    rank = (high - low) / 4
    print(f"DDP page at 2 ranks: peak {low:.0f} MB; at 6 ranks: {high:.0f} MB: {rank:.1f} MB a rank "
          f"(rank_budget.RANK_BYTES = {RANK_BYTES / MB:.0f} MB); the forkserver alone {forkserver:.0f} MB "
          f"(FORKSERVER_BYTES = {FORKSERVER_BYTES / MB:.0f} MB)")
    return {"peak_2_ranks_mb": low, "peak_6_ranks_mb": high, "rank_mb": rank, "forkserver_mb": forkserver}


def cgroup(limit_mb: int) -> Path:
    folder = Path(f"/sys/fs/cgroup/memory/dpviz-bench-{os.getpid()}")
    folder.mkdir()
    (folder / "memory.limit_in_bytes").write_text(str(limit_mb * MB))
    return folder


def sessions(browser, count: int, limit_mb: int | None, gpus: int = 4) -> dict:
    group = cgroup(limit_mb) if limit_mb else None
    try:
        with Server(OUT / "budget-server.log", cgroup=group) as server:
            server.wait_healthy()
            root = server.process.pid
            began = time.perf_counter()
            contexts = [browser.new_context(viewport={"width": 1400, "height": 900}) for _ in range(count)]
            pages = [context.new_page() for context in contexts]
            with Sampler(root) as sampler:
                for page in pages:  # every visitor at once: none waits for another's page to load
                    page.goto(server.url + LINK.format(gpus=gpus), wait_until="commit")
                drawn, waited = 0, 0
                for page in pages:
                    page.wait_for_selector(SVG, timeout=600_000)
                    page.wait_for_selector(IDLE, timeout=600_000)
                    waited += page.get_by_text("Waiting for room").count() > 0
                    title = page.locator("[data-testid=stPlotlyChart] .gtitle").first.text_content() or ""
                    drawn += "GPU 0 moves" in title
            seconds = time.perf_counter() - began
            for context in contexts:
                context.close()
            time.sleep(3.0)
            left = sum(is_rank(p, root) for p in tree(root))
            oom = int((group / "memory.failcnt").read_text()) if group else 0
            charged = int((group / "memory.max_usage_in_bytes").read_text()) / MB if group else None
            alive = server.process.poll() is None
    finally:
        if group is not None:
            time.sleep(1.0)
            group.rmdir()
    row = {"sessions": count, "limit_mb": limit_mb, "peak_pss_mb": sampler.peak / MB, "most_ranks_at_once": sampler.ranks,
           "comparisons_drawn": drawn, "ranks_left_after": left, "seconds": seconds, "server_alive": alive,
           "limit_hits": oom, "cgroup_peak_mb": charged}
    print(f"{count} sessions ({'limit ' + str(limit_mb) + ' MB' if limit_mb else 'no limit'}): peak PSS "
          f"{row['peak_pss_mb']:.0f} MB, at most {sampler.ranks} ranks at once, {drawn}/{count} comparisons drawn, "
          f"{left} ranks left after, {seconds:.0f} s, server {'alive' if alive else 'DEAD'}, memory limit hit {oom} times"
          + (f", the cgroup's peak charge {charged:.0f} MB" if group else ""))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--gpus", type=int, default=4, help="devices and ranks each session asks for")
    parser.add_argument("--limit-mb", type=int, help="run the server in a memory cgroup of this size")
    parser.add_argument("--costs", action="store_true", help="measure the forkserver's and a rank's cost instead")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    load_start = os.getloadavg()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        result = costs(browser) if args.costs else sessions(browser, args.sessions, args.limit_mb, args.gpus)
        browser.close()
    result["constants_mb"] = {"forkserver": FORKSERVER_BYTES / MB, "rank": RANK_BYTES / MB,
                              "tracker": TRACKER_BYTES / MB, "headroom": HEADROOM_BYTES / MB}
    part = "costs" if args.costs else f"sessions_{args.sessions}_{args.limit_mb or 'unlimited'}"
    save("bench_budget", part, result, load_start)


if __name__ == "__main__":
    main()
