"""DistributedDataParallel on the real page in headless Chromium: both engines drawn side by side, and no
rank process left behind when a tab closes in the middle of a run."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

from dpviz.engines.processes import KEPT_NAME

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the process table helpers, as the file runs alone
from processes import comm  # noqa: E402
from test_browser import ACTIVE_PANEL, IDLE, SVG, assert_no_exception, screenshot_full_page, show_tab  # noqa: E402

pytestmark = pytest.mark.browser


def _stat(pid: int) -> tuple[int, str, int] | None:
    """(parent pid, state, session id) of a process, None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return int(fields[1]), fields[0], int(fields[3])
    except (OSError, IndexError, ValueError):
        return None


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def rank_processes(port: int) -> list[int]:
    """Running ranks of the server listening on `port`: the deepest of its forkserver's processes, two levels under
    a forkserver or more. The server (in a session of its own, which every process it starts keeps) has a forkserver
    (dpviz.engines.processes), in two stages where the second is a fork of the first that outlives it, which forks
    each run's own process (dpviz.engines.apart), and a run of ranks forks its ranks: they are the leaves of that
    tree, below any other process (a run that has not started its ranks yet is a leaf only until it does); a
    process kept for a session's small runs names itself, and is left out."""
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    server = next((p for p in pids if "streamlit run app.py" in _cmdline(p) and f"--server.port {port}" in _cmdline(p)), None)
    if server is None:
        return []
    mine = {p: s[0] for p in pids for s in [_stat(p)] if s and s[1] != "Z" and s[2] == server
            and "forkserver" in _cmdline(p) and comm(p) != KEPT_NAME}
    depth = {p: 0 for p, up in mine.items() if up not in mine}  # a forkserver: under the server, or orphaned
    for _ in range(4):  # the second stage, a run, its ranks
        depth.update({p: depth[up] + 1 for p, up in mine.items() if up in depth and p not in depth})
    deepest = max(depth.values(), default=0)
    return [p for p, d in depth.items() if d == deepest >= 2 and p not in mine.values()]


def test_engine_both_draws_dataparallel_beside_ddp(page, artifacts):
    page.goto("/?engine=both&gpus=2&train=true&model=mlp&data_size=96&batch_size=32")
    page.wait_for_selector(IDLE, timeout=180_000)
    page.wait_for_selector(f"{ACTIVE_PANEL} {SVG}", timeout=180_000)
    assert_no_exception(page)
    compare = page.locator(ACTIVE_PANEL).inner_text().replace("\u2060", "")  # the Compare tab: each engine's bytes by what moves
    assert "DataParallel: GPU 0 sends" in compare and "DistributedDataParallel: rank 0 sends" in compare
    assert "engine=compare" in page.url and "engines=dp%2Cddp" in page.url.replace(",", "%2C")  # an old link, as it now reads
    assert page.locator(".stMainBlockContainer h2").first.inner_text().strip() == "DataParallel and DistributedDataParallel, side by side"
    for name in ("Split", "Timeline", "Memory"):
        panel = show_tab(page, name)
        page.wait_for_selector(IDLE)
        charts = panel.locator("[data-testid=stPlotlyChart]")
        charts.nth(1).locator(".main-svg").first.wait_for()
        assert charts.count() == 2, name  # DataParallel's beside DDP's
        text = panel.inner_text()
        assert "GPU" in text and "rank" in text, name
    assert_no_exception(page)
    screenshot_full_page(page, artifacts / "both-engines-memory.png")


def test_any_two_engines_compare_by_name_and_the_pair_is_picked_in_the_sidebar(page):
    page.goto("/?engine=compare&engines=zero1,fsdp&gpus=2&train=true&optimizer=adam")
    page.wait_for_selector(IDLE, timeout=180_000)
    page.wait_for_selector(f"{ACTIVE_PANEL} {SVG}", timeout=180_000)
    assert_no_exception(page)
    assert page.locator(".stMainBlockContainer h2").first.inner_text().strip() == "ZeRO-1 and FSDP, side by side"
    compare = page.locator(ACTIVE_PANEL).inner_text().replace("\u2060", "")
    assert "ZeRO-1: each rank sends" in compare and "FSDP: each rank sends" in compare and "reduce-scatter" in compare
    legend = page.locator(f"{ACTIVE_PANEL} .legendtext").evaluate_all("texts => texts.map(t => t.textContent)")
    assert "all-reduce" in legend and "gradients (reduce-scatter)" in legend  # one legend of kinds, each engine's parts in it


def test_closing_a_side_by_side_tab_mid_run_ends_every_rank(browser, app_url):
    port = urlparse(app_url).port
    context = browser.new_context(base_url=app_url)
    page = context.new_page()
    # Both engines (at most 2 ranks beside DataParallel), 10,000 steps: DataParallel's run, then the ranks' run
    # of half a minute or more, closed within seconds of its start.
    page.goto("/?engine=both&gpus=2&data_size=320000&batch_size=32")
    deadline = time.monotonic() + 120
    while len(rank_processes(port)) < 2:  # they start one after another
        assert time.monotonic() < deadline, f"the run's 2 rank processes never all ran: {rank_processes(port)}"
        time.sleep(0.1)
    context.close()  # the tab goes: the session ends, its script stops, its run's ranks must end
    deadline = time.monotonic() + 15  # well before the run itself would end
    while rank_processes(port):
        assert time.monotonic() < deadline, f"rank processes outlived the closed tab: {rank_processes(port)}"
        time.sleep(0.2)
