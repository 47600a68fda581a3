"""A session's kept process for its small runs: which runs go to it, its price held in the server's budget while it
lives and given back when it ends, the least recently used idle one ended first when a run needs the room, and
the process ending with its session's store."""
from __future__ import annotations

import gc
import time

from dpviz.config import RunConfig
from dpviz.page import run_costs
from dpviz.page.budget import MemoryBudget
from dpviz.page.session import Runs
from dpviz.page.warm_runs import KeptProcess, end_idle_oldest, small

from budget import limit
from processes import identity, running, wait_for


def _budget() -> MemoryBudget:
    return MemoryBudget(limit=lambda: 10**12, held_now=lambda: 0, floor=lambda: 0)


def _soon(condition) -> bool:
    return wait_for(condition, time.monotonic() + limit(starts=1))


def test_small_runs_of_one_process_go_to_the_kept_process_and_no_others():
    assert small(RunConfig()) and small(RunConfig(gpus=8, batch_size=10, train=True))
    assert not small(RunConfig(engine="ddp", gpus=2))  # ranks are processes of their own
    assert not small(RunConfig(gpus=16, batch_size=256, data_size=1_000_000))  # thousands of batches


def test_a_kept_process_holds_the_price_of_its_dearest_run_until_it_ends():
    budget = _budget()
    kept = KeptProcess(budget)
    try:
        kept.record(RunConfig(gpus=2))
        assert budget.kept() == run_costs.price(RunConfig(gpus=2))
        dearer = max([RunConfig(gpus=8, train=True), RunConfig(gpus=2)], key=run_costs.price)
        kept.record(dearer)
        kept.record(RunConfig(gpus=2))
        assert budget.kept() == run_costs.price(dearer) > 0
        process = identity(kept.pid)
    finally:
        kept.close()
    assert _soon(lambda: not running(process) and budget.kept() == 0)


def test_the_least_recently_used_idle_kept_process_ends_first_when_a_run_needs_room():
    budget = _budget()
    older, newer = KeptProcess(budget), KeptProcess(budget)
    try:
        older.record(RunConfig(gpus=2))
        newer.record(RunConfig(gpus=3))
        first, second = identity(older.pid), identity(newer.pid)
        while running(first):  # other sessions' idle processes, older still, may go before it: never the newer one
            assert end_idle_oldest() and running(second)
        # its price given back as it ends, not later: a run making room measures again at once
        assert budget.kept() == run_costs.price(RunConfig(gpus=3))
    finally:
        older.close()
        newer.close()


def test_a_sessions_store_sends_its_small_runs_to_its_kept_process_which_ends_with_the_store():
    runs = Runs()
    tutorial = runs.get(RunConfig(gpus=3))
    process = identity(runs._kept.pid)
    assert tutorial.lanes and process is not None
    runs.get(RunConfig(gpus=4))
    assert identity(runs._kept.pid) == process  # the same process ran the second run
    del runs, tutorial
    gc.collect()
    assert _soon(lambda: not running(process))


def test_a_kept_process_ends_soon_after_its_page_session_closes():
    from dpviz.page import warm_runs

    kept = KeptProcess(_budget())
    try:
        kept.record(RunConfig(gpus=2))
        process = identity(kept.pid)
        assert kept._open is None and not kept.session_closed()  # outside a served page: no session to watch
        open_ = [True]
        kept._open = lambda: open_[0]  # as a served page's session says (dpviz.page.warm_runs._page_session)
        warm_runs._watch_sessions()
        time.sleep(3 * warm_runs.WATCH_S)
        assert running(process)  # its session is open: it stays
        open_[0] = False  # the tab closes
        assert _soon(lambda: not running(process))
    finally:
        kept.close()
