"""The page's memory budget holds ZeRO-1's and FSDP's runs as it holds DDP's and DataParallel's: at their price.

The budget (dpviz.page.budget), the prices (dpviz.page.run_costs) and the page's run (dpviz.page.running) key on
the engine's spec, never on its name: an engine whose every rank is a process of its own is priced per rank and
capped by the ranks this host could hold at once.
"""
from __future__ import annotations

import contextlib

import pytest

from dpviz.config import RunConfig
from dpviz.engines import ENGINES
from dpviz.page import run_costs
from test_app import page
from user_text_traces import unescape_markdown

SHARDED = ["zero1", "fsdp"]


@pytest.mark.parametrize("name", SHARDED)
def test_their_ranks_are_processes_as_ddps_are(name):
    assert ENGINES[name].processes and ENGINES["ddp"].processes and not ENGINES["dp"].processes


@pytest.mark.parametrize("name", SHARDED)
def test_a_server_with_room_for_fewer_ranks_runs_fewer_and_says_why(name, monkeypatch):
    host_for_ranks(monkeypatch, RunConfig(engine=name, gpus=3, train=True))
    app = page(engine=name, gpus="6", train="true")
    assert not app.exception
    said = " ".join(unescape_markdown(w.value).replace("\u2060", "") for w in app.warning)
    assert "Showing 3 devices, not 6: this server has memory for 3 ranks at a time" in said
    assert app.query_params["gpus"] == "3" and app.query_params["engine"] == name


@pytest.mark.parametrize("name", ["zero1", "fsdp", "dp"])
def test_a_run_holds_its_price_while_it_runs_and_gives_it_back(name, monkeypatch):
    from dpviz.page.budget import BUDGET

    asked: list[int] = []
    hold = BUDGET.hold

    @contextlib.contextmanager
    def counted(price, *args, **kwargs):
        asked.append(price)
        with hold(price, *args, **kwargs):
            assert BUDGET.held >= price  # the bytes are taken while the run records
            yield

    monkeypatch.setattr(BUDGET, "hold", counted)
    app = page(engine=name, gpus="4", train="true")
    assert not app.exception and app.get("plotly_chart")
    assert asked == [run_costs.price(app.session_state["link_config"])] and BUDGET.held == 0


def host_for_ranks(monkeypatch, config: RunConfig) -> None:
    """Make this host's limit room for `config`'s ranks at a time and not one more."""
    from dpviz.page.budget import BUDGET

    room = run_costs.price(config) + run_costs.floor()
    monkeypatch.setattr(BUDGET, "_limit", lambda: room)


def test_fewer_ranks_are_only_counts_the_model_splits_over(monkeypatch):
    """Tensor parallelism gives each rank whole attention heads: the transformer's 8 split over 8, 4, 2 or 1 ranks.
    A host with room for fewer ranks than asked runs the most of those that fit, never a count the model refuses
    (3 ranks: the page raised the model's own complaint, with a traceback)."""
    from dpviz.page.budget import BUDGET

    at = lambda ranks: run_costs.price(RunConfig(engine="tp", model="transformer", gpus=ranks, train=True))
    room = run_costs.floor() + (at(2) + at(4)) // 2  # 2 ranks fit, 4 do not; 3 the heads refuse
    monkeypatch.setattr(BUDGET, "_limit", lambda: room)
    app = page(engine="tp", model="transformer", gpus="8", train="true")
    assert not app.exception
    said = " ".join(unescape_markdown(w.value).replace("\u2060", "") for w in app.warning)
    assert "Showing 2 devices, not 8" in said and app.query_params["gpus"] == "2"
