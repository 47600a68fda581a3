"""The page "Memory, every engine", driven by AppTest: a link with engine=memory runs the same settings under
every engine (DataParallel simulated, DDP, ZeRO-1 and FSDP on real processes) and draws one figure of each
device's memory by kind, its reading under it, then the bytes it moves per step in a chart of their own."""
import json

from dpviz.page.link import MEMORY, from_query, to_query, wanted_page
from test_app import page
from test_app_engines import shown_text

SETTINGS = dict(gpus="2", train="true", optimizer="adam", batch_size="8", data_size="16")
CHARTS = ["memory_chart", "memory_bytes_chart", "real_size_chart"]  # by kind, bytes per step, at real size


def chart(app, key: str) -> str:
    return next(c.proto.spec for c in app.get("plotly_chart") if c.key == key)


def test_a_memory_link_runs_every_engine_and_draws_the_comparison():
    app = page(engine=MEMORY, **SETTINGS)
    assert not app.exception
    assert app.radio(key="engine_choice").value == MEMORY and app.query_params["engine"] == MEMORY
    assert [c.key for c in app.get("plotly_chart")] == CHARTS  # every engine's run, then the same rules at real size
    memory, moved = chart(app, "memory_chart"), chart(app, "memory_bytes_chart")
    for name in ("DataParallel", "DDP", "ZeRO-1", "FSDP"):  # every engine's devices in both
        assert name in memory and name in moved, name
    for name in ("gradients", "optimizer state"):
        assert name in memory and name not in moved, name
    for name in ("all-gather (backward)", "broadcast", "sent per step (computed)"):
        assert name in moved and name not in memory, name
    assert "each device at the end of its last full step" in memory  # every device read at one moment
    # each engine's step, under the chart
    assert "Memory at the end of DataParallel's batch 2, DDP's step 2" in shown_text(app)
    text = shown_text(app)
    assert "; FSDP " in text and "1.5× DDP's" in text  # the reading under the chart, from the runs
    assert app.query_params["optimizer"] == "adam"


def test_the_control_switches_to_the_memory_page_and_forward_only_says_what_it_leaves_out():
    app = page(gpus="2", batch_size="8", data_size="16")
    app.radio(key="engine_choice").set_value(MEMORY).run()
    assert not app.exception and [c.key for c in app.get("plotly_chart")] == CHARTS
    assert "Forward only" in shown_text(app) and "trains nothing: turn on **Train**" in shown_text(app)


def test_the_link_word_is_a_page_not_an_engine():
    config, warnings = from_query({"engine": MEMORY, "gpus": "2"})
    assert warnings == [] and config.engine == "ddp" and wanted_page({"engine": MEMORY}) == MEMORY
    assert to_query(config, page=MEMORY)["engine"] == MEMORY and wanted_page({"engine": "ddp"}) is None


def test_at_real_size_plans_every_engine_and_holds_the_toy_run_to_the_same_rules():
    app = page(engine=MEMORY, **SETTINGS)
    assert not app.exception
    planned = chart(app, "real_size_chart")
    assert "80 GiB per device" in planned and "does not fit" in planned
    text = shown_text(app)
    assert "**DataParallel**: does not fit." in text and "**FSDP**: fits." in text  # 7B on 8 GPUs of 80 GB, Adam
    assert "holds exactly what the live runs' ranks held" in text and "ZeRO-1" in text
    app.number_input(key="real_gpus").set_value(1024).run()
    app.radio(key="real_memory").set_value(24).run()
    assert not app.exception and "1,024 devices of 24 GiB" in chart(app, "real_size_chart")


def test_at_real_size_plans_a_pipeline_a_stage_per_gpu_with_its_own_controls():
    from dpviz.engines.pipeline.layers import problem_of
    from dpviz.engines.pipeline.spec import schedule_problem

    app = page(engine=MEMORY, **SETTINGS)
    assert not app.exception
    # 7B's 34 layers over 8 GPUs, GPipe's 4 microbatches of 2 sequences in flight on each stage: it fits 80 GB.
    assert app.selectbox(key="real_schedule").value == "gpipe" and app.number_input(key="real_microbatches").value == 4
    planned = chart(app, "real_size_chart")
    assert "Pipeline" in planned and "schedule gpipe, microbatches 4" in planned
    assert "**Pipeline**: fits." in shown_text(app)
    # 1F1B with fewer microbatches than stages: torch refuses it, and the page says so in the pipeline's place,
    # the other engines planned as before.
    app.selectbox(key="real_schedule").set_value("1f1b").run()
    assert not app.exception
    text = shown_text(app)
    assert f"**Pipeline**: {schedule_problem('1f1b', 4, 8)}" in text and "**FSDP**: fits." in text
    assert "not planned" in chart(app, "real_size_chart")
    app.number_input(key="real_microbatches").set_value(8).run()
    assert not app.exception and "**Pipeline**: fits." in shown_text(app)
    # More GPUs than the model has layers: the run's own sentence.
    app.number_input(key="real_gpus").set_value(64).run()
    assert not app.exception and f"**Pipeline**: {problem_of('transformer', 64, 34)}" in shown_text(app)


def test_at_real_size_offers_mixed_precision_and_says_why_zero1_is_not_the_papers():
    app = page(engine=MEMORY, **SETTINGS)
    app.number_input(key="real_gpus").set_value(64).run()
    app.radio(key="real_precision").set_value("mixed").run()
    assert not app.exception
    text = shown_text(app)
    assert "mixed precision (bfloat16 compute" in text and "DistributedDataParallel 16;" in text
    assert "FSDP 0.25" in text and "ZeroRedundancyOptimizer" in text and "31.4 GB" in text


def test_a_mixed_toy_run_is_held_to_the_mixed_plan():
    app = page(engine=MEMORY, precision="mixed", **SETTINGS)
    assert not app.exception and app.query_params["precision"] == "mixed"
    assert "holds exactly what the live runs' ranks held" in shown_text(app)


def test_at_real_size_plans_tensor_parallelism_and_fsdp_over_it_and_says_why_a_degree_cannot_be_planned():
    app = page(engine=MEMORY, **SETTINGS)
    assert not app.exception and app.number_input(key="real_tp").value == 0  # every GPU: tp 8 on the 8
    assert "Tensor parallel sends per step, per device: all-reduce (forward)" in shown_text(app)
    app.number_input(key="real_tp").set_value(4).run()
    real = next(chart for chart in app.get("plotly_chart") if chart.key == "real_size_chart")
    assert not app.exception and "FSDP × TP" in json.loads(real.proto.spec)["data"][0]["x"]
    assert "FSDP × TP sends per step, per device:" in shown_text(app) and "reduce-scatter" in shown_text(app)
    app.number_input(key="real_tp").set_value(3).run()  # one sentence, the rest planned with TP over every GPU
    assert not app.exception and [c.key for c in app.get("plotly_chart")] == ["memory_chart", "memory_bytes_chart",
                                                                              "real_size_chart"]
    warned = [w.value.replace("\\", "") for w in app.warning]  # markdown's escapes taken off
    assert len(warned) == 1 and "degree of 3 does not divide the 8 GPUs;" in warned[0], warned
    assert "**Tensor parallel**: fits." in shown_text(app)
