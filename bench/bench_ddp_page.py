"""DDP on the hosted page: the first DDP chart against DataParallel's, and memory per rank count.

    .venv/bin/python bench/bench_ddp_page.py                 # first charts (2 pairs), then memory at 2-16 ranks
    .venv/bin/python bench/bench_ddp_page.py --ranks 4 8     # memory at these rank counts only

Needs Playwright and Chromium, as bench/bench_hosted.py (whose server and Chromium set-up it uses).

(a) first chart: a fresh `streamlit run app.py` per measurement, Chromium opening the tutorial's link
    (DataParallel) or the same link with engine=ddp&gpus=4, and the seconds from launching the server to
    the first plotly chart drawn. A B A B, ratios pair by pair: the first DDP chart includes starting the
    forkserver (torch imported once) and the four rank processes.
(b) memory: per rank count, a fresh server, the link engine=ddp&gpus=W&train=true (engine=both with --both,
    DataParallel's run beside DDP's), and the peak of the
    proportional set size (PSS: shared pages split between the processes that share them, so a rank forked
    from the forkserver counts only what it owns) summed over the server and every process under it (the
    forkserver, multiprocessing's resource tracker, the ranks), sampled every 50 ms until the page is idle,
    against the 690 MB of the smallest hosted tier.
Results also go to bench/out/bench_ddp_page.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_hosted import CHROMIUM, CHROMIUM_ARGS, HOSTED_LIMIT, IDLE, SVG, Server, _tree  # noqa: E402

OUT = Path(__file__).with_name("out")


def tree_pss(root: int) -> int:
    """Proportional set size in bytes, summed over the server `root` and every process it started."""
    total = 0
    for pid in _tree(root):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as rollup:
                total += next(int(line.split()[1]) * 1024 for line in rollup if line.startswith("Pss:"))
        except (OSError, StopIteration):
            pass
    return total


def first_chart(browser, link: str) -> float:
    with Server(OUT / "ddp-page-server.log") as server:
        server.wait_healthy()
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(server.url + link)
        page.wait_for_selector(SVG, timeout=180_000)
        seconds = time.perf_counter() - server.started
        page.close()
        return seconds


def peak_pss(browser, ranks: int, engine: str = "ddp") -> dict:
    with Server(OUT / "ddp-page-server.log") as server:
        server.wait_healthy()
        idle = tree_pss(server.process.pid)
        peak, stop = [idle], threading.Event()

        def sample() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], tree_pss(server.process.pid))
                stop.wait(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{server.url}/?engine={engine}&gpus={ranks}&train=true")
        page.wait_for_selector(SVG, timeout=300_000)
        page.wait_for_selector(IDLE, timeout=300_000)
        failed = page.locator("[data-testid=stException]").count()
        stop.set()
        sampler.join()
        after = tree_pss(server.process.pid)
        page.close()
        return {"engine": engine, "ranks": ranks, "idle_mb": idle / 1e6, "peak_mb": peak[0] / 1e6, "after_mb": after / 1e6,
                "exceptions": failed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--skip-first-chart", action="store_true")
    parser.add_argument("--both", action="store_true", help="memory of engine=both (DataParallel beside DDP) instead")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    results: dict = {"first_chart": [], "memory": []}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        if not args.skip_first_chart:
            for pair in range(args.pairs):
                dp = first_chart(browser, "/")
                ddp = first_chart(browser, "/?engine=ddp&gpus=4")
                results["first_chart"].append({"dp_s": dp, "ddp4_s": ddp, "ratio": ddp / dp})
                print(f"pair {pair + 1}: DataParallel page {dp:.2f} s, DDP at 4 ranks {ddp:.2f} s: {ddp / dp:.2f}x")
        for ranks in args.ranks:
            row = peak_pss(browser, ranks, "both" if args.both else "ddp")
            results["memory"].append(row)
            verdict = "within" if row["peak_mb"] * 1e6 <= HOSTED_LIMIT else "OVER"
            print(f"{row['engine']} {ranks:>2} ranks: PSS idle {row['idle_mb']:.0f} MB, peak {row['peak_mb']:.0f} MB ({verdict} 690 MB), "
                  f"after {row['after_mb']:.0f} MB, exceptions {row['exceptions']}")
        browser.close()
    (OUT / "bench_ddp_page.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
