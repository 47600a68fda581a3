"""The page, driven by Streamlit's AppTest: every view renders, controls and links change the run."""
import json
import re

import plotly.graph_objects as go
import pytest
from streamlit.testing.v1 import AppTest

from dpviz import RunConfig, record
from dpviz.trace import json_io as trace_json
from dpviz.echo import markdown_text
from dpviz.engines.dp.workers import POOL
from user_text_traces import EVIL, LINK, MARKUP, outside_code, payload_json, unescape_markdown

TIMEOUT = 120
TABS = ["One step", "Flow", "Split", "Timeline", "Sample map", "Step through", "Inputs", "Memory", "Tutorial log"]


def page(**query) -> AppTest:
    app = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    for name, value in query.items():
        app.query_params[name] = value
    return app.run()


def shown_text(app: AppTest) -> str:
    return " ".join(str(e.value) for kind in ("markdown", "info", "warning", "success", "caption") for e in getattr(app, kind))


def show_tab(app: AppTest, label: str) -> AppTest:
    """Click a view's tab: the page reruns and builds that view (only the shown tab's view is built)."""
    app.session_state["tab"] = label
    return app.run()


def every_tab(app: AppTest) -> list:
    """Show each tab in turn (the first last, as a page opens), with no exception; the charts they drew."""
    charts = []
    for label in TABS[1:] + TABS[:1]:
        show_tab(app, label)
        assert not app.exception, label
        charts += app.get("plotly_chart")
    return charts


def split_rows(app: AppTest) -> list[list[int]]:
    """Rows per device per batch, read back from the tutorial log's tab."""
    (log,) = show_tab(app, "Tutorial log").code
    batches, current = [], []
    for line in log.value.splitlines():
        if line.startswith("\tIn Model"):
            current.append(int(line.split("[")[1].split(",")[0]))
        elif line.startswith("Outside"):
            batches.append(sorted(current, reverse=True))
            current = []
    return batches


def test_default_page_renders_every_view_without_exception():
    app = page()
    assert not app.exception
    assert [t.label for t in app.tabs] == TABS
    assert len(app.get("plotly_chart")) == 1  # the first tab's view only: the others are built when shown
    assert len(every_tab(app)) == len(TABS) - 1  # every tab but the log draws a chart
    assert "Simulated devices: 2 CPU threads" in shown_text(app)
    assert split_rows(app) == [[15, 15]] * 3 + [[5, 5]]
    assert dict(app.query_params)["gpus"] == ["2"] or app.query_params["gpus"] == "2"


def test_eight_gpus_split_full_batches_into_seven_fours_and_a_two():
    app = page()
    app.slider(key="gpus").set_value(8).run()
    assert not app.exception
    assert split_rows(app) == [[4] * 7 + [2]] * 3 + [[2] * 5]
    threads = POOL.at_once(8)  # one per core: the replicas take turns where the devices outnumber them
    assert ("8 CPU threads stand in" if threads == 8 else f"took turns on {threads} CPU thread") in shown_text(app)


def test_query_parameters_are_applied():
    app = page(gpus="3", batch_size="10", data_size="25", shuffle="false", seed="9")
    assert not app.exception and not app.warning
    assert app.slider(key="gpus").value == 3 and app.number_input(key="batch_size").value == 10
    assert app.toggle(key="shuffle").value is False
    assert split_rows(app) == [[4, 4, 2], [4, 4, 2], [2, 2, 1]]


@pytest.mark.parametrize("query,words", [
    ({"gpus": "lots"}, "gpus must be a whole number"),
    ({"gpus": "-1"}, "gpus must be between 1 and 16"),
    ({"batch_size": "9999999"}, "batch\\_size must be between"),
    ({"backend": "quantum"}, "backend must be one of"),
])
def test_bad_query_parameters_warn_and_fall_back(query, words):
    app = page(**query)
    assert not app.exception
    assert any(words in w.value for w in app.warning)
    assert split_rows(app) == [[15, 15]] * 3 + [[5, 5]]  # the defaults ran


def test_an_uploaded_trace_is_shown_and_a_bad_one_warns():
    app = page()
    recorded = record(RunConfig(gpus=3, seed=1))
    app.file_uploader[0].upload("run.json", trace_json.dumps(recorded).encode(), "application/json").run()
    assert not app.exception
    assert "uploaded trace" in shown_text(app) and split_rows(app) == [[10, 10, 10]] * 3 + [[4, 4, 2]]
    # The sidebar now shows the settings the file was recorded with, and the link says them too.
    assert app.slider(key="gpus").value == 3 and app.number_input(key="seed").value == 1
    assert app.query_params["gpus"] == "3" and app.query_params["seed"] == "1"
    app.file_uploader[0].set_value(("bad.json", b"{\"format\": \"dpviz-trace\", \"version\": 7}", "application/json")).run()
    assert not app.exception
    assert any("bad\\.json could not be used" in w.value and "version 7" in w.value for w in app.warning)
    assert split_rows(app) == [[10, 10, 10]] * 3 + [[4, 4, 2]]  # the live run, with the settings left as they were
    assert app.slider(key="gpus").value == 3


def test_an_uploaded_file_that_lacks_what_a_view_draws_says_so_in_that_views_place():
    app = page()
    recorded = json.loads(trace_json.dumps(record(RunConfig(gpus=3, seed=1))))
    recorded["arguments"] = []  # a file that records no replica's arguments: the Inputs view has nothing to draw
    app.file_uploader[0].upload("lacking.json", json.dumps(recorded).encode(), "application/json").run()
    assert not app.exception and "uploaded trace" in shown_text(app)
    lacks = trace_json.loads(json.dumps(recorded))
    from dpviz.figures.views import views_of

    (inputs,) = [view for view in views_of(lacks) if view.key == "inputs"]
    said = inputs.lacks(lacks)
    assert said is not None
    show_tab(app, inputs.tab)
    assert not app.exception
    assert [info.value for info in app.info if "arguments" in str(info.value)] == [markdown_text(said)]
    assert not app.get("plotly_chart")  # nothing drawn in its place
    show_tab(app, "Split")  # every other view draws as before
    assert not app.exception and split_rows(app) == [[10, 10, 10]] * 3 + [[4, 4, 2]]


def test_training_from_a_link_draws_the_way_back():
    app = page(train="true", gpus="3")
    assert not app.exception and app.toggle(key="train").value is True
    specs = [c.proto.spec for c in every_tab(app)]
    # The way back: the flow's steps after the gather, in the vocabulary's words.
    assert any('"sum of gradients","optimizer step"' in spec for spec in specs)
    assert "The way back" in shown_text(app)
    assert show_tab(app, "Memory").radio(key="memory_batch").options == ["batch 1 of 4 (the first)", "batch 4 of 4 (the last)"]


def test_cuda_backend_without_gpus_falls_back_with_a_warning():
    app = page(backend="cuda")
    assert not app.exception
    assert any("so simulated devices are shown instead" in w.value for w in app.warning)


def test_each_pitfall_button_runs_its_preset_and_says_what_happened():
    from dpviz.presets import PRESETS

    app = page()
    for name, preset in PRESETS.items():
        app.button(key=f"preset_{name}").click().run()
        assert not app.exception, name
        assert app.query_params["model"] == preset.config.model and app.query_params["gpus"] == str(preset.config.gpus)
        assert f"Pitfall: {preset.title}" in shown_text(app)
        trace = record(preset.config)
        errors = " ".join(e.value for e in app.error)
        if trace.failure is not None:  # the error as the user's loop would raise it, on the page
            assert trace.failure.message.splitlines()[0] in errors and errors.endswith(f"`{trace.failure.original}`")
        else:
            assert not errors
        for note in trace.warnings:
            assert note.message in shown_text(app)
        assert len(every_tab(app)) == len(TABS) - 1  # a run that failed still draws every view of what ran


def test_a_preset_link_opens_the_preset():
    app = page(preset="state-lost")
    assert not app.exception
    assert app.selectbox(key="model").value == "counter"
    assert "calls` is 0" in shown_text(app)


@pytest.mark.parametrize("model,inputs", [("cnn", "tuple"), ("gru_dim1", "hidden"), ("mlp", "list"), ("gru", "dict")])
def test_models_and_inputs_from_the_sidebar_run_through_every_view(model, inputs):
    app = page()
    app.selectbox(key="model").set_value(model).run()
    app.selectbox(key="inputs").set_value(inputs).run()
    assert not app.exception and not app.error
    assert app.query_params["model"] == model and app.query_params["inputs"] == inputs
    assert len(every_tab(app)) == len(TABS) - 1


def shown_markdown(app: AppTest) -> list[str]:
    """Every markdown body the page shows: alerts, captions, paragraphs and the key figures' labels."""
    kinds = ("markdown", "info", "warning", "success", "caption", "error")
    return [str(e.value) for kind in kinds for e in getattr(app, kind)] + [m.label for m in app.metric]


def test_a_link_with_markup_in_its_values_warns_in_plain_text_of_bounded_length():
    sign_in = "[Session expired - sign in again](https://example.com/login)"
    app = page(gpus=sign_in, model=f"![x](http://{EVIL}/x.png)", preset=LINK, **{f"<img src=http://{EVIL}/p.png>": "1"},
               backend="q" * 100_000)
    assert not app.exception
    warnings = [w.value for w in app.warning]
    assert len(warnings) == 5  # one sentence per bad value
    for body in warnings:
        unescape_markdown(body)  # every punctuation character escaped: no link, image or markup
        assert len(body) < 600, body[:200]
    text = " ".join(unescape_markdown(body) for body in warnings).replace("\u2060", "")
    assert sign_in in text and "sign in again" in text and f"'![x](http://{EVIL}/x.png)'" in text
    assert "'qqqq" in text and "…" in text
    assert split_rows(app) == [[15, 15]] * 3 + [[5, 5]]  # the defaults ran


def test_an_uploaded_trace_with_markup_shows_it_as_text():
    app = page()
    app.file_uploader[0].upload("run.json", payload_json().encode(), "application/json").run()
    assert not app.exception and "uploaded trace" in " ".join(shown_markdown(app))
    assert len(every_tab(app)) == len(TABS) - 1
    for body in shown_markdown(app):
        prose = outside_code(body)
        assert not any(markup in prose for markup in MARKUP), prose[:300]
        assert "<" not in prose.replace("\\<", ""), prose[:300]
    assert any("href\\=\\\"http\\:\u2060\\/\\/evil\\.example" in body for body in shown_markdown(app))  # a device name
    name = f"[x](http://{EVIL}).json"
    app.file_uploader[0].set_value((name, b"{}", "application/json")).run()
    (warning,) = [w.value for w in app.warning]
    assert warning.startswith(f"{markdown_text(name)} could not be used") and unescape_markdown(markdown_text(name)).replace("\u2060", "") == name


def test_an_uploaded_ddp_trace_shows_ranks_and_no_tab_for_dataparallels_own_views():
    from ddp_traces import ddp_document

    app = page()
    app.file_uploader[0].upload("ddp.json", ddp_document("four_train").encode(), "application/json").run()
    assert not app.exception and not app.error
    infos, specs = set(), []
    for tab in [t.label for t in app.tabs]:  # each tab shown in turn (a page may build only the shown one)
        app.session_state["tab"] = tab
        app.run()
        assert not app.exception, tab
        infos |= {str(i.value) for i in app.info}
        specs += [c.proto.spec for c in app.get("plotly_chart")]
    from dpviz.figures import VIEWS

    dataparallel_only = [v.tab for v in VIEWS if "ddp" not in v.engines]
    assert {"Step through", "Inputs"} <= set(dataparallel_only)
    assert not set(dataparallel_only) & {t.label for t in app.tabs}  # a tab shows something for this run
    assert not any("runs only" in info for info in infos)
    for title in ("Rows per rank in each of 3 steps", "Timeline of all 3 steps, one lane per rank",
                  "rows loaded in 3 steps", "Memory per rank after each phase of step 3 of 3"):  # the last whole step
        # styled() wraps titles to a narrow chart: read them without its soft breaks
        assert any(title in spec.replace("\\u003cbr \\u002f\\u003e", " ").replace("<br />", " ") for spec in specs), title
    # Numbers travel base64-coded ("bdata"), where any three letters may happen to read "GPU": words only.
    unwrapped = [re.sub(r'"bdata":"[^"]*"', "", spec).replace("\\u003cbr \\u002f\\u003e", " ").replace("<br />", " ")
                 .replace("no GPU", "") for spec in specs]
    said = [spec[max(0, spec.find("GPU") - 200):spec.find("GPU") + 60] for spec in unwrapped if "GPU" in spec]
    assert not said, said  # what a chart of this run says about GPUs, where one does
    assert "Real processes, no GPU" in shown_text(app) and "**Processes, not GPUs.**" in shown_text(app)
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["ranks (processes)"] == "4" and metrics["rows per rank per step"] == "8 (global 32)"


@pytest.mark.parametrize("preset", ["scalar-loss", "state-lost", "rnn-hidden-dim"])
def test_a_pitfall_preset_opens_on_its_pitfall_chart(preset):
    app = page(preset=preset)
    assert not app.exception
    assert [t.label for t in app.tabs] == ["Pitfall"] + TABS  # the pitfall first, the views as ever after it
    (chart,) = app.get("plotly_chart")  # the shown tab, Pitfall, drew its chart
    assert chart.proto.spec and '"data"' in chart.proto.spec


def test_the_pitfall_tab_is_there_only_for_a_run_that_has_one():
    app = page(preset="scalar-loss")
    app.slider(key="gpus").set_value(1).run()  # one device: DataParallel calls the model itself, no per-GPU losses
    assert not app.exception and [t.label for t in app.tabs] == TABS


def test_presenting_draws_every_chart_in_larger_type():
    app = page()
    plain = app.get("plotly_chart")[0].proto.spec
    app.toggle(key="presenting").set_value(True).run()
    assert not app.exception
    larger = app.get("plotly_chart")[0].proto.spec
    import json

    size = lambda spec: json.loads(spec)["layout"]["font"]["size"]
    assert size(larger) > size(plain)
    assert app.session_state["tab"] == "One step" and len(every_tab(app)) == len(TABS) - 1  # every view, presented, still draws


def test_a_link_opens_in_presenting_and_the_pages_link_keeps_it():
    app = page(presenting="true", gpus="3")
    assert not app.exception and not app.warning and app.toggle(key="presenting").value
    spec = json.loads(app.get("plotly_chart")[0].proto.spec)
    assert spec["layout"]["font"]["size"] > 16  # drawn in the larger type from the first screen
    assert app.query_params["presenting"] == "true" and app.query_params["gpus"] == "3"
    app.toggle(key="presenting").set_value(False).run()
    assert "presenting" not in app.query_params  # off: the link is the plain page's, as before


def test_a_bad_presenting_in_a_link_is_one_sentence_and_the_page_plain():
    app = page(presenting="loud")
    assert not app.exception and not app.toggle(key="presenting").value
    (warning,) = app.warning
    assert "presenting must be true or false" in warning.value and "loud" in warning.value


def test_a_long_timeline_can_be_drawn_batch_by_batch():
    app = page(data_size="4500", gpus="8")  # 150 batches: the window is summarised as one typical batch
    show_tab(app, "Timeline")
    summary = app.get("plotly_chart")[0].proto.spec
    app.toggle(key="timeline_detail").set_value(True).run()
    assert not app.exception
    detail = app.get("plotly_chart")[0].proto.spec
    assert detail != summary and "batch 7" in detail and "batch 8" not in detail  # batches 0-7, each drawn
    assert app.slider(key="timeline_first").max == 150  # numbered from 1, as the charts number batches


def test_the_shown_tab_is_kept_when_a_run_adds_the_pitfall_tab():
    app = page()
    show_tab(app, "Memory")
    app.selectbox(key="model").set_value("loss").run()  # forward returns a loss: the Pitfall tab appears, first
    assert not app.exception and [t.label for t in app.tabs][0] == "Pitfall"
    assert app.session_state["tab"] == "Memory"
    show_tab(app, "Inputs")  # a click still chooses
    assert app.session_state["tab"] == "Inputs"
    app.selectbox(key="model").set_value("linear").run()  # the Pitfall tab goes
    assert app.session_state["tab"] == "Inputs"


def test_flow_step_through_inputs_and_memory_show_one_batch_numbered_from_1():
    app = page(train="true", gpus="3")  # batches of 30, 30, 30, 10; Inputs and Memory keep the first and the last
    # The last whole batch (the fourth is short), as every engine opens; numbered from 1, as read
    assert app.slider(key="one_step_batch").value == 3 and app.slider(key="one_step_batch").min == 1
    assert show_tab(app, "Flow").slider(key="flow_batch").value == 3
    assert show_tab(app, "Step through").slider(key="step_batch").value == 3
    assert show_tab(app, "Inputs").radio(key="inputs_batch").value == 3  # the kept batch nearest: "batch 4 of 4"
    assert show_tab(app, "Memory").radio(key="memory_batch").value == 3
    app.radio(key="memory_batch").set_value(0).run()  # Memory's choice moves the others
    assert show_tab(app, "Flow").slider(key="flow_batch").value == 1
    app.slider(key="flow_batch").set_value(2).run()  # batch 2: not one Inputs kept, the nearest is batch 1
    assert show_tab(app, "Step through").slider(key="step_batch").value == 2
    assert show_tab(app, "Inputs").radio(key="inputs_batch").value == 0
    assert "Batch 1 of 4" in " ".join(c.proto.spec for c in app.get("plotly_chart"))
    app.toggle(key="shuffle").set_value(False).run()  # a new run opens on its own opening batch again
    assert show_tab(app, "Flow").slider(key="flow_batch").value == 3
    assert not app.exception


def test_every_engine_opens_one_step_on_the_same_step_and_says_which():
    """One rule for every engine: 100 rows in batches of 30 on 3 devices end with a short step (DataParallel's
    batch of 10, DDP's 4 rows a rank); both open on the third, the last whole one, and their titles say so."""
    for engine, unit in (("dp", "batch"), ("ddp", "step")):
        app = page(engine=engine, train="true", gpus="3")
        assert not app.exception and app.slider(key="one_step_batch").value == 3, engine
        title = " ".join(c.proto.spec for c in app.get("plotly_chart"))
        assert f"{unit.title()} 3 of 4, the last whole {unit}:" in title, engine


def test_a_presets_lesson_step_is_where_its_views_open():
    """idle-gpus' lesson is its short last batch (GPUs 5-7 get nothing): its views open there, not on a whole one."""
    app = page(preset="idle-gpus")
    assert not app.exception and app.session_state["tab"] == "Split"
    assert show_tab(app, "One step").slider(key="one_step_batch").value == 4
    assert "Batch 4 of 4, the last batch, the lesson's:" in " ".join(c.proto.spec for c in app.get("plotly_chart"))


def test_a_preset_opens_on_its_tab_and_a_failure_is_said_above_the_tabs():
    app = page(preset="kwargs-small-batch")
    assert not app.exception and app.session_state["tab"] == "Inputs"
    assert app.info[0].value.startswith("**Pitfall: A keyword argument with a batch smaller than the GPUs.** Shown in **Inputs**.")
    assert "Batch 4 failed" in app.info[0].value
    assert app.radio(key="inputs_batch").value == 3  # the failed batch
    show_tab(app, "Flow")
    app.button(key="preset_idle-gpus").click().run()  # another preset: its own tab, whatever was shown
    assert not app.exception and app.session_state["tab"] == "Split"


def test_settings_that_happen_to_be_a_presets_keep_the_tab_shown():
    app = page()
    show_tab(app, "Memory")
    app.slider(key="gpus").set_value(8).run()  # the idle-gpus preset's settings, reached by the slider
    assert not app.exception and app.session_state["tab"] == "Memory"
    assert app.info[0].value.startswith("**Pitfall: Idle GPUs on a short last batch.** Shown in **Split**.")


def test_the_timelines_detail_waits_behind_an_expander_under_it():
    app = page(gpus="4")
    show_tab(app, "Timeline")
    assert not app.exception
    labels = [e.label for e in app.expander]
    assert "More on these times" in labels
    from dpviz.figures.chart_details import chart_details

    spec = json.loads(app.get("plotly_chart")[0].proto.spec)
    detail = spec["layout"]["meta"]["details"]
    assert detail and chart_details(go.Figure(spec)) == detail
    shown = app.expander[labels.index("More on these times")].markdown
    assert [m.value for m in shown] == [detail]  # the very text the chart left out of its note
