"""Fixtures for the browser tests: one real `streamlit run app.py` and one headless Chromium per session.

The tests skip, saying what is missing and how to get it, when Playwright for Python or Chromium is not
installed; nothing else in the suite depends on these fixtures. DPVIZ_CHROMIUM overrides the Chromium
binary (default /usr/bin/chromium, Debian's package: Playwright cannot download browsers here).
Screenshots and the server's log go to test-artifacts/ at the repository root (gitignored).
"""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator, Sequence

import pytest

from waits import watched

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("DPVIZ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
VIEWPORT = {"width": 1400, "height": 900}
SERVER_START_TIMEOUT = 60  # seconds until /_stcore/health must answer
PAGE_TIMEOUT = 60_000  # ms for any one wait in the page; a run on a slow shared machine takes seconds


def _missing() -> str | None:
    """Why the browser tests cannot run here, as a sentence that says how to fix it; None if they can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed: run .venv/bin/pip install -r requirements-dev.txt"
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        return (
            f"Chromium is not installed at {CHROMIUM}: run apt-get install chromium "
            "(or set DPVIZ_CHROMIUM to a Chromium binary)"
        )
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """test-artifacts/ at the repository root, where screenshots and the server's log are kept."""
    ARTIFACTS.mkdir(exist_ok=True)
    for old in ARTIFACTS.glob("failed-*.png"):  # from an earlier session; this one's failures replace them
        old.unlink()
    return ARTIFACTS


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the whole session (skips every browser test when it cannot start)."""
    reason = _missing()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@contextlib.contextmanager
def streamlit_server(log_path: Path, cgroup: Path | None = None, program: Sequence[str] = (),
                     cwd: Path = ROOT) -> Iterator[tuple[subprocess.Popen, str]]:
    """A real `streamlit run app.py` from the repository root (or `program`, from `cwd`: `dpviz page` from a user's
    folder), once it answers: (its process, its URL); in the cgroup folder `cgroup` when given (the server and every
    process it starts). Stopped at the end (SIGTERM, as a host stops it) unless the caller stopped it already."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        *(program or (sys.executable, "-m", "streamlit", "run", "app.py")), "--server.headless", "true",
        "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
    ]
    if cgroup is not None:  # join the cgroup, then become the server: the same process, limited
        command = ["sh", "-c", f'echo $$ > "{cgroup}/cgroup.procs" && exec "$@"', "sh", *command]
    with open(log_path, "wb") as log:
        # A session of its own: every process the server starts keeps its id (the session's), even one whose parent
        # has ended (the forkserver's second stage outlives its first), so a test can tell this server's processes.
        server = subprocess.Popen(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  start_new_session=True)
        try:
            deadline = time.monotonic() + SERVER_START_TIMEOUT
            while not _healthy(url):
                if server.poll() is not None:
                    pytest.fail(f"streamlit exited with status {server.returncode}; see {log_path}")
                if time.monotonic() > deadline:
                    pytest.fail(f"streamlit did not answer {url}/_stcore/health in {SERVER_START_TIMEOUT} s; see {log_path}")
                time.sleep(0.2)
            yield server, url
        finally:
            if server.poll() is None:
                server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


@pytest.fixture(scope="session")
def app_url(browser, artifacts) -> str:
    """The URL of a real `streamlit run app.py`, started from the repository root and stopped at the end."""
    with streamlit_server(artifacts / "streamlit-server.log") as (_, url):
        yield url


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"report_{report.when}", report)  # lets the page fixture see whether the test failed
    return report


@pytest.fixture
def page(browser, app_url, artifacts, request):
    """A fresh browser context (a new Streamlit session) per test, counting the script's runs (waits.py); a screenshot
    is kept if the test fails."""
    context = watched(browser.new_context(viewport=VIEWPORT, base_url=app_url))
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT)
    try:
        yield page
    finally:
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            try:
                page.screenshot(path=str(artifacts / f"failed-{request.node.name}.png"), full_page=True)
            except Exception:  # the page may be gone; the test's own error says more
                pass
        context.close()
