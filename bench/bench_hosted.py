"""How the page fares on a small hosted machine: cold start to first chart, and peak server memory.

    .venv/bin/python bench/bench_hosted.py              # cold start, then every configuration below
    .venv/bin/python bench/bench_hosted.py --quick      # cold start and the tutorial's configuration only
    .venv/bin/python bench/bench_hosted.py --only rows-1M

Needs Playwright for Python (requirements-dev.txt) and Chromium (apt-get install chromium; DPVIZ_CHROMIUM
overrides the path /usr/bin/chromium). Each measurement starts a fresh `streamlit run app.py` on a free
loopback port, so nothing is cached from an earlier one. Chromium is launched before the server, so its own
start-up is not counted.

(a) cold start: seconds from launching `streamlit run app.py` until the server answers /_stcore/health,
    and until the first plotly chart of the tutorial's page is drawn in Chromium (an SVG `.main-svg`).
(b) peak memory: the server's resident set size, summed over the server process and every process it started (its session: the forkserver and its runs too), read
    from /proc every 50 ms, while Chromium opens the page through a link with a configuration's settings,
    waits until the script is idle (typing into the sidebar any number the link failed to carry through),
    then clicks every tab and waits until each of its charts is drawn. Printed per
    configuration: RSS of the idle server before the page opens, the peak, RSS once everything is drawn
    (what the session keeps), and the time the page took. The configurations are derived from the
    limits in dpviz/config.py, so they stay the heaviest the controls allow: 16 devices, output 1,024,
    the smallest batch that keeps within MAX_BATCHES (MAX_TRAIN_BATCHES when training), and either the
    most rows (1,000,000, at the widest input that fits MAX_DATASET_ELEMENTS: 16) or the widest input
    (1,024, on the 16,384 rows that fill MAX_DATASET_ELEMENTS, in batches of 16 so all 16 replicas run);
    both again with training on (backward pass and SGD step) when the page has that control.
The verdict compares every peak with 690 MB (the smallest hosted tier), read as 690 x 10^6 bytes.
Results also go to bench/out/bench_hosted.json.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere without installing

from dpviz import config as config_module  # noqa: E402
from dpviz.host_memory import session as _tree  # noqa: E402  the server and every process it started (Server)
from dpviz.config import MAX_BATCHES, MAX_DATASET_ELEMENTS, RunConfig  # noqa: E402

CHROMIUM = os.environ.get("DPVIZ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
HOSTED_LIMIT = 690 * 10**6  # bytes
SAMPLE_EVERY = 0.05  # seconds
IDLE = "[data-testid=stApp][data-test-script-state=notRunning]"
ACTIVE_PANEL = "[data-testid=stTabPanel]:not([data-st-inactive])"
SVG = "[data-testid=stPlotlyChart] .main-svg"
EXCEPTION = "[data-testid=stException]"

def _heaviest(data_size: int, input_size: int, min_batch: int, train: bool = False) -> RunConfig:
    """16 devices, widest output, and the smallest batch (so the most batches) the limits allow."""
    most = getattr(config_module, "MAX_TRAIN_BATCHES", MAX_BATCHES) if train else MAX_BATCHES
    batch = max(min_batch, -(-data_size // most))
    extra = {"train": True} if train else {}
    return RunConfig(data_size=data_size, batch_size=batch, gpus=16, input_size=input_size, output_size=1024, **extra)


MOST_ROWS = config_module.LIMITS["data_size"][1]
WIDEST = config_module.LIMITS["input_size"][1]
CONFIGS = {
    "tutorial": RunConfig(),
    # The most rows, in the most batches the limits allow, at the widest input that fits MAX_DATASET_ELEMENTS.
    "rows-1M": _heaviest(MOST_ROWS, MAX_DATASET_ELEMENTS // MOST_ROWS, 1),
    # The widest input on as many rows as fit MAX_DATASET_ELEMENTS; batches of 16 use all 16 replicas.
    "wide-1024": _heaviest(MAX_DATASET_ELEMENTS // WIDEST, WIDEST, 16),
    # The same rows one per batch where the limits allow: the most batches at that width, one replica each.
    "wide-1024-small-batches": _heaviest(MAX_DATASET_ELEMENTS // WIDEST, WIDEST, 1),
}
DEFAULT_RUN = ["tutorial", "rows-1M", "wide-1024"]
if "train" in {f.name for f in dataclasses.fields(RunConfig)}:
    # Training adds a backward pass, gradients and an optimiser step per batch (and its own batch limit).
    CONFIGS["rows-1M-train"] = _heaviest(MOST_ROWS, MAX_DATASET_ELEMENTS // MOST_ROWS, 1, train=True)
    CONFIGS["wide-1024-train"] = _heaviest(MAX_DATASET_ELEMENTS // WIDEST, WIDEST, 16, train=True)
    DEFAULT_RUN += ["wide-1024-train", "rows-1M-train"]


def page_has_control(name: str) -> bool:
    """Whether the page has a widget keyed `name` (a setting the page can't set is no configuration of it):
    app.py, or the sidebar and views it draws from dpviz/page/."""
    sources = [ROOT / "app.py", *sorted((ROOT / "dpviz" / "page").glob("*.py"))]
    return any(f'key="{name}"' in path.read_text() for path in sources)


def tree_rss(root: int) -> int:
    """Resident set size in bytes, summed over the server `root` and every process it started."""
    total = 0
    for pid in _tree(root):
        try:
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            pass
    return total


class RssSampler:
    """Samples tree_rss(pid) every SAMPLE_EVERY seconds on a thread; `peak` since the last `reset`."""

    def __init__(self, pid: int):
        self.pid, self.peak, self.last = pid, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.last = tree_rss(self.pid)
            self.peak = max(self.peak, self.last)
            self._stop.wait(SAMPLE_EVERY)

    def reset(self) -> None:
        self.peak = self.last = tree_rss(self.pid)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class Server:
    """A fresh `streamlit run app.py` on a free loopback port, stopped (terminate, then kill) on exit."""

    def __init__(self, log: Path, cgroup: Path | None = None):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.cgroup = cgroup  # a cgroup folder the server (and so every process it starts) runs in

    def __enter__(self) -> "Server":
        command = [
            sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
            "--server.port", str(self.port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
        ]
        if self.cgroup is not None:  # join the cgroup, then become the server: the same process, limited
            command = ["sh", "-c", f'echo $$ > "{self.cgroup}/cgroup.procs" && exec "$@"', "sh", *command]
        self._log = open(self.log, "wb")
        self.started = time.perf_counter()
        # In a session of its own, which every process it starts stays in: the forkserver's second stage, and every run
        # under it, hang off init once the first stage exits, out of the server's tree; its session counts them.
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
        return self

    def wait_healthy(self, timeout: float = 120) -> float:
        """Seconds from launch until /_stcore/health answers."""
        deadline = time.perf_counter() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        return time.perf_counter() - self.started
            except OSError:
                pass
            if self.process.poll() is not None:
                raise RuntimeError(f"streamlit exited with status {self.process.returncode}; see {self.log}")
            if time.perf_counter() > deadline:
                raise RuntimeError(f"streamlit did not answer in {timeout} s; see {self.log}")
            time.sleep(0.02)

    def __exit__(self, *exc) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


def query(config: RunConfig) -> str:
    values = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in config.to_dict().items()}
    return "?" + urllib.parse.urlencode(values)


def raise_shown_exception(page) -> None:
    box = page.locator(EXCEPTION)
    if box.count():
        raise RuntimeError("the page shows an exception: " + box.first.inner_text()[:500])


def cold_start(browser, out: Path) -> dict:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    with Server(out / "server-cold-start.log") as server:
        healthy = server.wait_healthy()
        page.goto(server.url + "/", wait_until="commit")
        page.wait_for_selector(f"{SVG}, {EXCEPTION}", timeout=300_000)
        drawn = time.perf_counter() - server.started
        raise_shown_exception(page)
    page.close()
    return {"server_healthy_s": round(healthy, 2), "first_chart_s": round(drawn, 2)}


LABELS = {"batch_size": "Batch size", "data_size": "Data size", "input_size": "Input size",
          "output_size": "Output size", "seed": "Seed"}


def settings_the_link_dropped(page, config: RunConfig, timeout_ms: int) -> list[str]:
    """Type into the sidebar any number the link did not carry through; returns their names.

    A link is meant to reproduce the page; this is a fallback for a page whose link handling drops a
    value (an early version checked data_size against the default batch_size). A value the page then
    still adjusts, with a warning, is left as the page chose; the report shows the configuration run.
    """
    page.wait_for_selector(IDLE, timeout=timeout_ms)
    dropped = []
    for name, label in LABELS.items():
        field = page.get_by_label(label, exact=True)
        wanted = str(getattr(config, name))
        if field.input_value() != wanted:
            dropped.append(name)
            field.fill(wanted)
            field.press("Enter")
            try:  # the rerun starts; a run too quick to catch here is fine
                page.wait_for_selector("[data-testid=stApp]:not([data-test-script-state=notRunning])", timeout=3000)
            except Exception:
                pass
            page.wait_for_selector(IDLE, timeout=timeout_ms)
    return dropped


def shown_config(page) -> dict:
    """The settings the page ran with, read back from its URL."""
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(page.url).query))


def draw_everything(page, timeout_ms: int) -> None:
    """Wait until the script is idle, then show every tab and wait until it is drawn."""
    page.wait_for_selector(IDLE, timeout=timeout_ms)
    page.wait_for_selector(f"{SVG}, {EXCEPTION}", state="attached", timeout=timeout_ms)
    raise_shown_exception(page)
    for name in [t.strip() for t in page.get_by_role("tab").all_inner_texts()]:
        page.get_by_role("tab", name=name, exact=True).click()
        panel = page.locator(ACTIVE_PANEL)
        page.wait_for_function(
            "name => document.querySelector('[data-testid=stTab][aria-selected=true]')?.innerText.trim() === name",
            arg=name, timeout=timeout_ms)
        panel.locator("[data-testid=stElementContainer]").first.wait_for(timeout=timeout_ms)
        charts = panel.locator("[data-testid=stPlotlyChart]")
        for i in range(charts.count()):
            charts.nth(i).locator(".main-svg").first.wait_for(timeout=timeout_ms)


def memory(browser, name: str, config: RunConfig, out: Path, timeout_s: float) -> dict:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    with Server(out / f"server-{name}.log") as server:
        server.wait_healthy()
        sampler = RssSampler(server.process.pid)
        try:
            time.sleep(0.5)
            sampler.reset()
            idle_rss = sampler.last
            start = time.perf_counter()
            page.goto(server.url + "/" + query(config), wait_until="commit")
            error, dropped = None, []
            try:
                dropped = settings_the_link_dropped(page, config, int(timeout_s * 1000))
                draw_everything(page, int(timeout_s * 1000))
            except Exception as exc:  # report what was measured up to the failure
                error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            seconds = time.perf_counter() - start
            time.sleep(1.0)  # the last messages to the browser
            end_rss, peak = tree_rss(server.process.pid), sampler.peak
            alive = server.process.poll() is None
            wanted = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in config.to_dict().items()}
            differs = {k: v for k, v in shown_config(page).items() if k in wanted and wanted[k] != v}
        finally:
            sampler.stop()
            page.close()
    return {
        "config": config.to_dict(), "batches": config.num_batches, "page_s": round(seconds, 1),
        "idle_server_rss_mb": round(idle_rss / 1e6), "peak_rss_mb": round(peak / 1e6),
        "after_rss_mb": round(end_rss / 1e6), "under_limit": peak < HOSTED_LIMIT,
        "server_alive": alive, "error": error, "typed_into_sidebar": dropped, "page_ran_instead": differs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="cold start and the tutorial's configuration only")
    parser.add_argument("--only", nargs="+", choices=sorted(CONFIGS), help="memory for these configurations only")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds a page may take (default 1200)")
    args = parser.parse_args()
    names = ["tutorial"] if args.quick else args.only or DEFAULT_RUN
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sys.exit("Playwright for Python is missing: .venv/bin/pip install -r requirements-dev.txt")
    if not os.access(CHROMIUM, os.X_OK):
        sys.exit(f"Chromium is missing at {CHROMIUM}: apt-get install chromium (or set DPVIZ_CHROMIUM)")

    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    print(f"limits: MAX_BATCHES {MAX_BATCHES:,}, MAX_DATASET_ELEMENTS {MAX_DATASET_ELEMENTS:,}; "
          f"{os.cpu_count()} CPUs; hosted limit {HOSTED_LIMIT / 1e6:.0f} MB", flush=True)
    results: dict = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            results["cold_start"] = cold = cold_start(browser, out)
            print(f"(a) cold start: server answers after {cold['server_healthy_s']:.2f} s, "
                  f"first chart drawn after {cold['first_chart_s']:.2f} s", flush=True)
            print("(b) server RSS (server + children), MB = 10^6 bytes:", flush=True)
            print(f"    {'configuration':<18} {'batches':>8} {'idle':>6} {'peak':>6} {'after':>6} {'page s':>7}  verdict")
            for name in names:
                if CONFIGS[name].to_dict().get("train") and not page_has_control("train"):
                    print(f"    {name:<18} skipped: the page has no train control yet", flush=True)
                    continue
                r = results[name] = memory(browser, name, CONFIGS[name], out, args.timeout)
                verdict = "under 690 MB" if r["under_limit"] else "OVER 690 MB"
                if not r["server_alive"]:
                    verdict += ", server died"
                if r["typed_into_sidebar"]:
                    verdict += f" (the link dropped {', '.join(r['typed_into_sidebar'])}: typed into the sidebar)"
                if r["page_ran_instead"]:
                    verdict += f" (the page ran {r['page_ran_instead']} instead)"
                if r["error"]:
                    verdict += f", page did not finish: {r['error']}"
                print(f"    {name:<18} {r['batches']:>8,} {r['idle_server_rss_mb']:>6} {r['peak_rss_mb']:>6} "
                      f"{r['after_rss_mb']:>6} {r['page_s']:>7.1f}  {verdict}", flush=True)
        finally:
            browser.close()
    peaks = [r["peak_rss_mb"] for k, r in results.items() if k != "cold_start"]
    if peaks:
        worst = max(peaks)
        print(f"highest peak {worst} MB: {'stays under' if worst < HOSTED_LIMIT / 1e6 else 'does NOT stay under'} "
              f"the 690 MB hosted tier")
    (out / "bench_hosted.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
