"""How soon the page's first chart is drawn after `streamlit run`, against a minimal page, in one run.

    .venv/bin/python bench/bench_start.py              # 3 cold starts of each page, alternating
    .venv/bin/python bench/bench_start.py --repeats 5

The baseline is the least a page like this one can do: a script that imports torch and plotly and
draws one plotly chart (written to a temporary folder). Each start is a fresh `streamlit run` on a
free loopback port, so nothing is cached between starts; headless Chromium (launched once, before the
first server, so its own start-up is not counted) opens the page and the clock stops when the first
chart's SVG is drawn. Starts alternate between the two pages, so a machine that slows down or speeds
up during the run affects both alike. Printed: every start, the medians, and the ratio of medians.
Needs Playwright for Python and Chromium (see bench_hosted.py).
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # results.py beside this script
from results import save  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("DPVIZ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
SVG = "[data-testid=stPlotlyChart] .main-svg"
EXCEPTION = "[data-testid=stException]"
MINIMAL_PAGE = '''import plotly.graph_objects as go
import streamlit as st
import torch

st.title("A minimal page")
st.plotly_chart(go.Figure(go.Bar(y=torch.arange(1, 4).tolist())))
'''


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def first_chart(browser, script: Path, log: Path, timeout_s: float = 300) -> float:
    """Seconds from launching `streamlit run script` until its first chart is drawn in `browser`."""
    port = free_port()
    command = [sys.executable, "-m", "streamlit", "run", str(script), "--server.headless", "true",
               "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"]
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    with open(log, "wb") as out:
        started = time.perf_counter()
        server = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            while True:  # the server answers after about a second; the page cannot load before
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2):
                        break
                except OSError:
                    if server.poll() is not None or time.perf_counter() - started > timeout_s:
                        raise RuntimeError(f"streamlit did not start; see {log}")
                    time.sleep(0.02)
            page.goto(f"http://127.0.0.1:{port}/", wait_until="commit")
            page.wait_for_selector(f"{SVG}, {EXCEPTION}", timeout=timeout_s * 1000)
            drawn = time.perf_counter() - started
            if page.locator(EXCEPTION).count():
                raise RuntimeError("the page shows an exception: " + page.locator(EXCEPTION).first.inner_text()[:300])
        finally:
            page.close()
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    return drawn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="cold starts of each page (default 3)")
    args = parser.parse_args()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sys.exit("Playwright for Python is missing: .venv/bin/pip install -r requirements-dev.txt")
    if not os.access(CHROMIUM, os.X_OK):
        sys.exit(f"Chromium is missing at {CHROMIUM}: apt-get install chromium (or set DPVIZ_CHROMIUM)")
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    load_start = os.getloadavg()
    times: dict[str, list[float]] = {"minimal": [], "app": []}
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        minimal = Path(folder) / "minimal_page.py"
        minimal.write_text(MINIMAL_PAGE)
        pages = {"minimal": minimal, "app": ROOT / "app.py"}
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            for repeat in range(args.repeats):
                order = list(pages) if repeat % 2 == 0 else list(reversed(pages))
                for name in order:
                    seconds = first_chart(browser, pages[name], out / f"server-start-{name}.log")
                    times[name].append(seconds)
                    print(f"  start {repeat + 1}: {name:<8} first chart after {seconds:5.2f} s", flush=True)
        finally:
            browser.close()
    minimal_s, app_s = statistics.median(times["minimal"]), statistics.median(times["app"])
    print(f"{os.cpu_count()} CPUs; medians of {args.repeats}: minimal page {minimal_s:.2f} s, "
          f"app.py {app_s:.2f} s: {app_s / minimal_s:.2f}x the minimal page")
    save("bench_start", "first_chart", {"repeats": args.repeats, "minimal_s": times["minimal"], "app_s": times["app"],
                                        "minimal_median_s": minimal_s, "app_median_s": app_s,
                                        "ratio": app_s / minimal_s}, load_start)


if __name__ == "__main__":
    main()
