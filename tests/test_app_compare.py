"""The page of two engines compared, any two: a link's engines=A,B, the sidebar's two pickers, the settings fitted
to both and said in one sentence, the heading naming both, the link round-tripping, both One steps on one step."""
import itertools
import json

import pytest

from dpviz.engines import ENGINES
from dpviz.figures.text_fit import unwrap
from test_app import page
from test_app_engines import shown_text, show_tab


def chart_title(app) -> str:
    return unwrap(json.loads(app.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"])


def test_a_link_of_two_sharded_engines_compares_them_by_name():
    app = page(engine="compare", engines="zero1,fsdp", gpus="4", train="true", optimizer="adam")
    assert not app.exception and app.header[0].value == "ZeRO-1 and FSDP, side by side"
    assert app.radio(key="engine_choice").value == "compare"
    assert (app.selectbox(key="compare_first").value, app.selectbox(key="compare_second").value) == ("zero1", "fsdp")
    assert app.query_params["engine"] == "compare" and app.query_params["engines"] == "zero1,fsdp"
    assert app.query_params["optimizer"] == "adam" and app.query_params["gpus"] == "4"
    text = shown_text(app)
    assert "ZeRO-1: each rank sends" in text and "FSDP: each rank sends" in text
    assert "updated shards" in text and "parameters gathered" in text and "reduce-scatter" in text
    assert "what a ZeRO-1 rank sends" in chart_title(app) or "what a FSDP rank sends" in chart_title(app)


def test_the_settings_are_fitted_to_both_engines_and_the_change_said_once():
    # The tutorial's Linear cannot be cut into stages: a link's settings are fitted where the link is read; a link
    # that named no model is told what it opens with, one that named the Linear why it changed.
    app = page(engine="compare", engines="dp,pipeline", gpus="2")
    assert not app.exception and app.header[0].value == "DataParallel and Pipeline, side by side"
    said = [w.value.replace("\\", "") for w in app.warning]
    assert len(said) == 1 and "the link opens with" in said[0] and "model = 'ffn'" in said[0] and "train = true" in said[0]
    app = page(engine="compare", engines="dp,pipeline", gpus="2", model="linear")
    said = [w.value.replace("\\", "") for w in app.warning]
    why = [w for w in said if "cannot be cut into pipeline stages" in w]
    assert len(why) == 1 and "using model = 'ffn' instead" in why[0], said  # the model's change, said once
    assert sum("'ffn'" in w for w in said) == 1 and any("train = true" in w for w in said), said
    assert "DataParallel: GPU 0 sends" in shown_text(app) and "activations" in shown_text(app)
    # Picked in the sidebar, the pipeline first beside DDP's settings: fitted to both, and the change said once.
    app = page(engine="compare", engines="dp,ddp", gpus="2", train="false")
    app.selectbox(key="compare_first").set_value("pipeline").run()
    assert not app.exception and app.query_params["engines"] == "pipeline,ddp"
    said = [w.value.replace("\\", "") for w in app.warning if "To run the same settings under" in w.value.replace("\\", "")]
    assert len(said) == 1 and "Pipeline and DistributedDataParallel" in said[0], said
    assert "train = true (not false)" in said[0] and "model = 'ffn' (not 'linear')" in said[0]  # the fewest layers that cut
    assert app.query_params["train"] == "false"  # the visitor's settings stay; the runs take the fitted ones
    assert "Pipeline: stage 1 sends" in shown_text(app) and "DistributedDataParallel: each rank sends" in shown_text(app)


def test_a_bad_engines_list_is_said_in_one_sentence_and_the_first_pair_compared():
    app = page(engine="compare", engines="dp,dp")
    assert not app.exception
    assert any("are not two different engines" in w.value for w in app.warning)
    assert app.query_params["engines"] == "dp,ddp"


def test_the_sidebar_picks_the_pair_and_the_link_follows():
    app = page(engine="compare", gpus="2", train="true", model="mlp")
    app.selectbox(key="compare_second").set_value("fsdp").run()
    assert not app.exception and app.query_params["engines"] == "dp,fsdp"
    assert app.header[0].value == "DataParallel and FSDP, side by side"
    app.selectbox(key="compare_first").set_value("fsdp").run()  # the other's engine: the two swap, never the same
    assert not app.exception and app.query_params["engines"] == "fsdp,dp"


def test_both_one_steps_open_on_the_same_step():
    app = page(engine="compare", engines="dp,ddp", gpus="2", train="true", data_size="120", batch_size="30")
    show_tab(app, "One step")
    assert not app.exception
    titles = [unwrap(json.loads(chart.proto.spec)["layout"]["title"]["text"]) for chart in app.get("plotly_chart")]
    steps = {title.split(" of ")[0].rsplit(" ", 1)[-1] for title in titles if " of " in title}
    assert len(titles) == 2 and len(steps) == 1, titles


def test_memory_by_kind_sets_both_engines_devices_side_by_side_at_the_same_moment():
    app = page(engine="compare", engines="ddp,fsdp", gpus="2", train="true", optimizer="adam")
    assert not app.exception
    chart = next(c for c in app.get("plotly_chart") if c.key == "by_kind_chart")  # under Compare and its formulas
    spec = json.loads(chart.proto.spec)
    groups = {x for bar in spec["data"] if bar.get("type") == "bar" for x in bar["x"][0]}
    assert groups == {"DDP", "FSDP"}  # one group of bars per engine
    kinds = {bar["name"] for bar in spec["data"] if bar.get("type") == "bar" and bar.get("yaxis", "y") == "y"}
    assert {"parameters", "gradients", "optimizer state"} <= kinds
    moments = {c[1] for bar in spec["data"] if bar.get("type") == "bar" and bar.get("yaxis", "y") == "y"
               for c in bar["customdata"]}
    assert all(m.startswith("the end of step") for m in moments), moments
    assert "Parameters, gradients and optimizer state per device" in shown_text(app)


def test_a_pipeline_capped_by_the_page_says_stages():
    app = page(engine="pipeline", gpus="8", model="cnn", train="true", batch_size="32", microbatches="4")
    app.slider(key="gpus").set_value(16).run()
    assert not app.exception
    # a pipeline's processes are its stages, said in its own word
    assert "Showing 8 devices, not 16: the page shows at most 8 stages" in shown_text(app).replace("\\", "")


@pytest.mark.parametrize("link", [{"engine": "both"}] + [{"engine": "compare", "engines": f"{a},{b}"}
                                                         for b in ENGINES if b != "dp" for a, b in [("dp", b), (b, "dp")]])
def test_a_bare_link_comparing_dataparallel_opens_on_gpu0_as_the_hub_and_says_why(link):
    # DataParallel's lesson beside any engine, GPU 0 serving every other GPU, needs training on three GPUs or more: a
    # link naming neither opens with them (said in one sentence) rather than on "these settings cannot show GPU 0 as
    # the hub"; a link that names them keeps them (the visitor's settings stand, and the page says what it cannot show).
    app = page(**link)
    assert not app.exception
    said = [w.value.replace("\\", "") for w in app.warning if "the link opens with" in w.value.replace("\\", "")]
    assert len(said) == 1 and "GPU 0 is the hub" in said[0] and "train = true" in said[0] and "gpus = 4" in said[0], said
    assert app.query_params["train"] == "true" and app.query_params["gpus"] == "4"  # the link keeps what it opened with
    assert "cannot show GPU 0 as the hub" not in chart_title(app) + shown_text(app)
    assert "GPU 0" in chart_title(app)  # the headline is the hub's: what GPU 0 moves against the other engine's device
    named = page(**link, gpus="2", train="false")
    assert "cannot show GPU 0 as the hub" in chart_title(named) and named.query_params["gpus"] == "2"
