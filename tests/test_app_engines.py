"""The page's engine control, driven by AppTest: DataParallel, DistributedDataParallel on real processes,
and any two side by side, from the control, from links (old engine=both ones too) and from the pitfall presets."""
import re

import pytest
from streamlit.testing.v1 import AppTest

from dpviz.config import RunConfig
from dpviz.presets import DDP_PRESETS, PRESETS
from test_app import page


def shown_text(app: AppTest) -> str:
    text = " ".join(str(e.value) for kind in ("markdown", "info", "warning", "success", "caption", "error")
                    for e in getattr(app, kind))
    return re.sub(r"\\(.)", r"\1", text).replace("\u2060", "")  # the words, without markdown's escapes


def show_tab(app: AppTest, label: str) -> AppTest:
    app.session_state["tab"] = label
    return app.run()


def test_a_ddp_link_runs_ranks_and_its_first_tab_draws_them():
    app = page(engine="ddp", gpus="3", train="true")
    assert not app.exception and app.header[0].value == "How DistributedDataParallel shares the work"
    assert app.radio(key="engine_choice").value == "ddp" and app.slider(key="gpus").value == 3
    assert app.tabs[0].label != "Flow" or "ranks" in shown_text(app)  # a tab that draws DDP comes first
    assert app.get("plotly_chart"), "the first screen shows a chart"
    assert "Split" in [t.label for t in app.tabs] and "Inputs" not in [t.label for t in app.tabs]  # DataParallel's only
    assert "3 ranks" in shown_text(app) and "GPU 0" not in shown_text(app)
    assert app.query_params["engine"] == "ddp"


def test_engine_both_compares_and_draws_every_view_for_each_engine():
    app = page(engine="both", gpus="2", train="true", model="mlp", data_size="96", batch_size="32")
    assert not app.exception and [t.label for t in app.tabs][0] == "Compare"
    assert [c.key for c in app.get("plotly_chart")] == ["compare_chart", "growth_chart", "by_kind_chart", "by_collective_chart"]
    text = shown_text(app)
    assert "DataParallel: GPU 0 sends" in text and "DistributedDataParallel: rank 0 sends" in text  # BatchNorm's buffers
    assert "These settings cannot show GPU 0 as the hub" in text and "Use 3 GPUs to see" in text  # 2 GPUs: one spoke
    for label in ("Split", "Timeline", "Memory"):
        show_tab(app, label)
        assert not app.exception and len(app.get("plotly_chart")) == 2, label  # DataParallel's beside DDP's
    show_tab(app, "Inputs")  # DataParallel's alone: DDP's side has nothing to draw there
    assert not app.exception and len(app.get("plotly_chart")) == 1 and "runs only" not in shown_text(app)
    assert app.query_params["engine"] == "compare" and app.query_params["engines"] == "dp,ddp"  # an old link, as it now reads
    assert app.header[0].value == "DataParallel and DistributedDataParallel, side by side"


def test_switching_the_control_from_dp_to_ddp_reruns_on_ranks():
    app = page()
    assert app.header[0].value == "How nn.DataParallel splits a batch"
    app.radio(key="engine_choice").set_value("ddp").run()
    assert not app.exception and "ranks" in shown_text(app)
    app.toggle(key="train").set_value(True).run()
    app.number_input(key="accumulate").set_value(2).run()
    assert not app.exception and app.query_params["accumulate"] == "2"


def test_more_ranks_than_the_page_shows_are_said_and_capped():
    app = page(engine="ddp", gpus="16")
    assert not app.exception and "Showing 8 devices, not 16: the page shows at most 8 ranks" in shown_text(app)
    assert app.query_params["gpus"] == "8"


def test_both_engines_run_at_the_count_asked_for():
    app = page(engine="both", gpus="4", train="true")
    assert not app.exception and "Showing" not in shown_text(app)
    assert app.query_params["gpus"] == "4"
    assert "4 simulated GPUs against 4 DDP ranks" in " ".join(str(c.proto.spec) for c in app.get("plotly_chart")[:1])


def test_a_server_with_room_for_fewer_ranks_says_so_in_a_visitors_words(monkeypatch):
    from test_sharded_budget import host_for_ranks

    host_for_ranks(monkeypatch, RunConfig(engine="ddp", gpus=3, train=True))  # a comparison's link opens training
    app = page(engine="both", gpus="6")
    text = shown_text(app)
    assert not app.exception and "Showing 3 devices for both engines, not 6: this server has memory for 3 devices at a time" in text
    said = [str(w.value) for w in app.warning if "this server has memory" in re.sub(r"\\(.)", r"\1", str(w.value))]
    assert said and not any("python -m" in w for w in said)  # the budget speaks to a visitor, not to whoever serves
    assert app.query_params["gpus"] == "3"


@pytest.mark.parametrize("name", list(DDP_PRESETS))
def test_every_ddp_preset_link_runs_and_names_itself(name):
    app = page(preset=name)
    assert not app.exception, name
    assert app.radio(key="engine_choice").value == "ddp"
    assert f"Pitfall: {DDP_PRESETS[name].title}" in shown_text(app)


def test_a_ddp_preset_button_switches_the_engine_and_back():
    app = page()
    assert "preset_ddp-padding" not in [b.key for b in app.button]  # DataParallel's pitfalls only
    app.radio(key="engine_choice").set_value("compare").run()
    keys = [b.key for b in app.button]
    assert {f"preset_{n}" for n in PRESETS} | {f"preset_{n}" for n in DDP_PRESETS} <= set(keys)
    app.button(key="preset_ddp-padding").click().run()
    assert not app.exception and app.radio(key="engine_choice").value == "ddp"
    app.radio(key="engine_choice").set_value("dp").run()
    assert not app.exception and app.header[0].value == "How nn.DataParallel splits a batch"


def test_a_failing_ddp_run_says_which_step_and_rank():
    app = page(preset="ddp-unused-parameter")
    errors = " ".join(e.value for e in app.error)
    assert "Step 2 failed" in errors and "rank 0" in errors and "Expected to have finished reduction" in errors


def test_the_compare_preset_opens_both_engines_at_8_devices_with_gpu0_first():
    app = page(preset="compare-gpu0")
    assert not app.exception and app.radio(key="engine_choice").value == "compare"
    assert app.query_params["engine"] == "compare" and app.query_params["gpus"] == "8" and app.query_params["train"] == "true"
    assert "GPU 0 as the bottleneck, 8 devices." in shown_text(app)
    import json

    from dpviz.figures.text_fit import unwrap

    title = unwrap(json.loads(app.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"])
    assert "GPU 0 sends" in title and "what a DDP rank sends" in title  # the Compare tab's chart comes first
    text = shown_text(app)
    assert "not on GPUs" in text and "faster on GPUs" in text and "measurably faster" not in text  # CPU: no verdict


def test_a_run_waits_for_room_held_by_another_session_then_runs(monkeypatch):
    import threading
    import time

    from dpviz.page import run_costs
    from dpviz.page.budget import BUDGET

    room = run_costs.price(RunConfig(engine="ddp", gpus=4, train=True))
    monkeypatch.setattr(BUDGET, "_limit", lambda: room + run_costs.HEADROOM_BYTES)
    monkeypatch.setattr(BUDGET, "_held_now", lambda: 0)  # nothing the server keeps could make room: it must wait
    monkeypatch.setattr(BUDGET, "_floor", lambda: 0)
    held, release = threading.Event(), threading.Event()

    def other_session() -> None:  # another visitor's 4-rank run holds all the room for a while
        with BUDGET.hold(room):
            held.set()
            release.wait(timeout=60)

    other = threading.Thread(target=other_session)
    other.start()
    held.wait(timeout=10)
    threading.Timer(2.0, release.set).start()
    began = time.monotonic()
    app = page(engine="ddp", gpus="2", train="true")
    other.join(timeout=10)
    assert not app.exception and time.monotonic() - began >= 2.0  # it waited for the other run's room
    assert len(app.get("plotly_chart")) >= 1 and "Waiting for room" not in shown_text(app)  # then ran, message gone
    assert BUDGET.held == 0


def test_leaving_the_queue_runs_nothing_until_the_visitor_joins_again():
    app = page(engine="ddp", gpus="2")
    config = app.session_state["link_config"]
    app.session_state["left_queue"] = config
    app.run()
    assert not app.exception and "You left the queue" in shown_text(app) and not app.get("plotly_chart")
    app.button(key="join_queue").click().run()
    assert not app.exception and "You left the queue" not in shown_text(app) and app.get("plotly_chart")
