"""Three visitors of a class open heavy pages at once on one server inside a 690 MB memory cgroup, the smallest
hosted tier, on a host as fresh as a new one (torch's libraries not yet in the page cache): every page draws, and
nothing is killed for memory. Before runs left the server and were priced, these three made the kernel kill the
server, or left it reclaiming the same pages of torch so long that none drew."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from conftest import streamlit_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the time limits
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # bench/: the fresh host
from budget import limit  # noqa: E402
from fresh_host import Cgroup, forget_torch_pages, writable  # noqa: E402

pytestmark = pytest.mark.browser
LINKS = ["/?engine=fsdp&gpus=4&train=true&model=transformer", "/?engine=zero1&gpus=4&train=true&optimizer=adam",
         "/?engine=both&gpus=8&train=true"]
IDLE = "[data-testid=stApp][data-test-script-state=notRunning]"
SVG = "[data-testid=stPlotlyChart] .main-svg"


def test_three_heavy_pages_at_once_in_690_mb_all_draw_and_nothing_is_killed(browser, artifacts):
    if not writable():
        pytest.skip("no writable memory cgroup hierarchy here to make a 690 MB cgroup in")
    forget_torch_pages()
    group = Cgroup(690)
    # The work: the server and the forkserver each start a Python (the forkserver imports torch), then three
    # runs, none of which may wait longer than its collective timeout.
    deadline_s = limit(starts=2, then_s=len(LINKS) * 30)
    try:
        with streamlit_server(artifacts / "class-server.log", cgroup=group.folder) as (server, url):
            contexts = [browser.new_context(viewport={"width": 1400, "height": 900}) for _ in LINKS]
            pages = [context.new_page() for context in contexts]
            began = time.monotonic()
            for page, link in zip(pages, LINKS):  # at once: none waits for another's page to load
                page.goto(url + link, wait_until="commit")
            for page, link in zip(pages, LINKS):
                left_ms = max(1_000, int((deadline_s - (time.monotonic() - began)) * 1000))
                page.wait_for_selector(SVG, timeout=left_ms)
                page.wait_for_selector(IDLE, timeout=left_ms)
                assert page.locator("[data-testid=stException]").count() == 0, link
            for context in contexts:
                context.close()
            assert server.poll() is None  # the server is alive
    finally:
        kills = group.oom_kills()
        group.remove()
    assert kills == 0
