"""The page's server stopped while a visitor's DDP run is in flight, as a host stops it (SIGTERM) or a person at
the terminal does (Ctrl-C): the server and every process the run started end within seconds."""
from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest

from conftest import PAGE_TIMEOUT, VIEWPORT, streamlit_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the process table helpers
from budget import limit  # noqa: E402
from processes import command_line, descendants, running, threads, wait_for  # noqa: E402

pytestmark = pytest.mark.browser
# 1,000 training steps of a GRU on 4 ranks: long enough to be stopped mid-run
LONG_RUN = "?engine=ddp&gpus=4&train=true&model=gru&data_size=200000&batch_size=200"
ENDED_S = 5.0  # "within a few seconds": from the signal to the last process gone, on a quiet machine


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT], ids=lambda n: signal.Signals(n).name)
def test_stopping_the_server_mid_run_ends_every_rank(number, browser, artifacts):
    with streamlit_server(artifacts / f"streamlit-server-stop-{number}.log") as (server, url):
        context = browser.new_context(viewport=VIEWPORT, base_url=url)
        try:
            page = context.new_page()
            page.set_default_timeout(PAGE_TIMEOUT)
            page.goto(url + "/" + LONG_RUN)
            seen: set = set()

            def stepping() -> bool:  # four ranks below the forkserver, each past joining its group
                ranks = [p for p, _ in seen if running((p, _)) and "forkserver" in command_line(p)
                         and not descendants(p) and threads(p) > 2]
                return len(ranks) >= 4

            assert wait_for(stepping, time.monotonic() + PAGE_TIMEOUT / 1000, every=0.05, seen=seen,
                            root=server.pid), "the page's DDP run did not start its ranks"
            # The forkserver and its tracker end when the server does, and a server that has imported torch
            # takes about as long to wind down as a start of one: on a busy machine, longer than ENDED_S.
            ended_s = limit(starts=1, then_s=ENDED_S)
            server.send_signal(number)
            assert wait_for(lambda: not any(running(p) for p in seen), time.monotonic() + ended_s), \
                [command_line(p[0])[:100] for p in seen if running(p)]
            assert server.wait(timeout=ended_s) is not None
        finally:
            context.close()
