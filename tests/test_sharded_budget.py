"""The page's memory budget holds ZeRO-1's and FSDP's ranks as it holds DDP's: one share per rank process.

The budget (dpviz.page.rank_budget) and the page's run (dpviz.page.running) key on the engine's spec, `processes`,
never on its name: an engine whose every rank is a process of its own is held, and capped, by its rank count.
"""
from __future__ import annotations

import contextlib

import pytest

from dpviz.engines import ENGINES
from test_app import page
from user_text_traces import unescape_markdown

SHARDED = ["zero1", "fsdp"]


@pytest.mark.parametrize("name", SHARDED)
def test_their_ranks_are_processes_as_ddps_are(name):
    assert ENGINES[name].processes and ENGINES["ddp"].processes and not ENGINES["dp"].processes


@pytest.mark.parametrize("name", SHARDED)
def test_a_server_with_room_for_fewer_ranks_runs_fewer_and_says_why(name, monkeypatch):
    from dpviz.page import rank_budget

    monkeypatch.setattr(rank_budget.BUDGET, "_room", lambda: 3)
    app = page(engine=name, gpus="6", train="true")
    assert not app.exception
    said = " ".join(unescape_markdown(w.value).replace("\u2060", "") for w in app.warning)
    assert "Showing 3 devices, not 6: this server has memory for 3 ranks at a time" in said
    assert app.query_params["gpus"] == "3" and app.query_params["engine"] == name


@pytest.mark.parametrize("name, held", [("zero1", 4), ("fsdp", 4), ("dp", 1)])
def test_a_run_holds_one_share_per_rank_while_it_runs_and_gives_them_back(name, held, monkeypatch):
    from dpviz.page import rank_budget

    asked: list[int] = []
    ranks = rank_budget.BUDGET.ranks

    @contextlib.contextmanager
    def counted(count, waiting=None):
        asked.append(count)
        with ranks(count, waiting):
            assert rank_budget.BUDGET.held >= count  # the shares are taken while the run records
            yield

    monkeypatch.setattr(rank_budget.BUDGET, "ranks", counted)
    app = page(engine=name, gpus="4", train="true")
    assert not app.exception and app.get("plotly_chart")
    assert asked == [held] and rank_budget.BUDGET.held == 0
