"""`dpviz page`, the page as the installed package serves it, started from a folder of the user's own: links take
the same query parameters, the page's Streamlit settings hold there too, and --trace opens a recorded run."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import PAGE_TIMEOUT, VIEWPORT, streamlit_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the time limits derived from this machine
from budget import limit  # noqa: E402

COMMAND = Path(sys.executable).parent / "dpviz"
READY = "[data-testid=stApp][data-test-script-state=notRunning]"
PRIMARY = "rgb(0, 114, 178)"  # .streamlit/config.toml's primaryColor (#0072B2); Streamlit's own is #FF4B4B


def dpviz_page(folder: Path, log: Path, *arguments: str):
    """`dpviz page` started in `folder`, headless on a free port: (its process, its URL) once it answers."""
    return streamlit_server(log, program=[str(COMMAND), "page", *arguments], cwd=folder)


def opened(browser, url: str):
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT)
    page.goto(url)
    page.locator(READY).wait_for()
    return context, page


def colours_in_use(page) -> set[str]:
    return set(page.evaluate("""() => [...document.querySelectorAll('*')].flatMap(e => {
        const s = getComputedStyle(e); return [s.color, s.backgroundColor, s.borderTopColor]; })"""))


def test_dpviz_page_opens_a_link_with_the_pages_own_settings(browser, artifacts, tmp_path):
    with dpviz_page(tmp_path, artifacts / "dpviz-page.log") as (_, url):
        context, page = opened(browser, f"{url}/?gpus=3&batch_size=10&data_size=25")
        try:
            assert page.get_by_role("slider", name="Number of GPUs").input_value() == "3"
            assert page.get_by_label("Batch size", exact=True).input_value() == "10"
            assert page.locator("[data-testid=stException]").count() == 0
            # The settings beside the installed script: the page's accent colour, and no Deploy button for a class.
            assert PRIMARY in colours_in_use(page)
            assert page.locator("[data-testid=stAppDeployButton]").count() == 0
        finally:
            context.close()


def test_dpviz_page_opens_the_trace_it_is_given(browser, artifacts, tmp_path):
    recorded = subprocess.run([str(COMMAND), "--gpus", "5", "--batch-size", "7", "--data-size", "7", "--trace",
                               "run.json"], cwd=tmp_path, capture_output=True, text=True, timeout=limit(starts=1))
    assert recorded.returncode == 0, recorded.stderr
    with dpviz_page(tmp_path, artifacts / "dpviz-page-trace.log", "--trace", "run.json") as (_, url):
        context, page = opened(browser, url)
        try:
            assert page.locator("[data-testid=stException]").count() == 0
            text = page.locator("[data-testid=stMain]").inner_text()
            # The recorded run (7 rows over 5 GPUs), not the live run of the page's defaults.
            assert "Showing an uploaded trace" in text and "splits 2, 2, 2, 1" in text, text[:1500]
        finally:
            context.close()
