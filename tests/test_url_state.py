"""Links reproduce settings; bad links give a sentence each and fall back to valid values."""
import pytest

from dpviz.config import ENGINE_OPTIONS, MAX_BATCHES, RunConfig
from dpviz.engines import ENGINES

OTHER_ENGINES_ONLY = set(ENGINE_OPTIONS) - set(ENGINES["dp"].unset)  # what a DataParallel link leaves out
from dpviz.page.link import from_query, settle, to_query, wanted_presenting
from dpviz.presets import LINK_PRESETS


def test_a_link_round_trips_every_setting():
    config = RunConfig(batch_size=7, data_size=333, gpus=16, input_size=9, output_size=3, shuffle=False, seed=42, backend="simulated", train=True)
    assert from_query(to_query(config)) == (config, [])
    assert set(to_query(config)) == set(config.to_dict()) - OTHER_ENGINES_ONLY  # DataParallel's settings, nothing else
    assert "optimizer" in to_query(config)  # the optimizer is DataParallel's as every engine's
    other = RunConfig(model="gru_dim1", inputs="hidden", gpus=3)
    assert from_query(to_query(other)) == (other, [])
    ddp = RunConfig(engine="ddp", gpus=5, train=True, bucket_cap_mb=0.25, accumulate=3, epochs=2, set_epoch=False,
                    batch_per_process=True, drop_last=True, find_unused=True, join=True, timeout_s=9, optimizer="adam")
    assert from_query(to_query(ddp)) == (ddp, [])
    assert set(to_query(ddp)) == set(ddp.to_dict()) - {"reshard_after_forward", "tp", "schedule", "microbatches"}  # DDP's
    fsdp = RunConfig(engine="fsdp", gpus=3, train=True, optimizer="adam", reshard_after_forward=False)
    assert from_query(to_query(fsdp)) == (fsdp, [])  # FSDP's own option travels in its links
    assert to_query(fsdp)["reshard_after_forward"] == "false"
    mesh = RunConfig(engine="fsdp", gpus=4, tp=2, model="ffn", train=True)
    assert from_query(to_query(mesh)) == (mesh, []) and to_query(mesh)["tp"] == "2"  # FSDP × TP's degree too
    pipeline = RunConfig(engine="pipeline", gpus=4, model="transformer", train=True, batch_size=32, data_size=96,
                         microbatches=8, schedule="1f1b", epochs=2, optimizer="adam")
    assert from_query(to_query(pipeline)) == (pipeline, [])  # a pipeline's own options travel in its links
    assert to_query(pipeline)["schedule"] == "1f1b" and to_query(pipeline)["microbatches"] == "8"


def test_presenting_travels_in_a_link_beside_the_settings_and_is_no_setting():
    config = RunConfig(gpus=3)
    query = to_query(config, presenting=True)
    assert query["presenting"] == "true" and "presenting" not in to_query(config)
    assert from_query(query) == (config, [])  # how the page is shown: not refused, and no setting of the run
    assert wanted_presenting(query) == (True, []) and wanted_presenting({}) == (False, [])
    on, said = wanted_presenting({"presenting": "maybe"})
    assert not on and len(said) == 1 and "presenting must be true or false" in said[0]
    assert from_query({"presenting": "maybe"})[1] == said  # said once, by the link's sentences


def test_a_link_to_a_pipeline_of_the_tutorials_linear_is_fitted_and_said():
    config, warnings = from_query({"engine": "pipeline"})  # the tutorial's Linear, batches of 30, no training
    # The catalogue's first model a pipeline can cut: ffn (Linear, GELU, Linear).
    assert config.engine == "pipeline" and config.model == "ffn" and config.train and config.batch_size % config.microbatches == 0
    # said as what the link opens with, not as a complaint about the model it never named
    assert len(warnings) == 1 and "opens with" in warnings[0] and "model = 'ffn'" in warnings[0]


@pytest.mark.parametrize("query, words", [
    ({"engine": "dp", "bucket_cap_mb": "1"}, "bucket_cap_mb is an option of DistributedDataParallel and ZeRO-1"),
    ({"engine": "ddp", "inputs": "kwargs"}, "DataParallel pitfall"),
    ({"engine": "ddp", "uneven": "true"}, "needs shuffle and drop_last off"),
    ({"engine": "ddp", "accumulate": "4"}, "needs train"),
    ({"engine": "dp", "reshard_after_forward": "false"}, "reshard_after_forward is a FSDP option"),
])
def test_settings_that_do_not_go_together_are_said_and_dropped(query, words):
    config, warnings = from_query(query)
    assert len(warnings) == 1 and words in warnings[0] and warnings[0].endswith("instead.")
    RunConfig(**config.to_dict())  # what the page runs is valid


def test_values_valid_together_but_not_with_the_defaults_are_kept():
    config, warnings = from_query({"data_size": "1000000", "batch_size": "256", "gpus": "16"})
    assert warnings == [] and (config.data_size, config.batch_size, config.gpus) == (1_000_000, 256, 16)


def test_missing_parameters_take_the_tutorials_defaults():
    assert from_query({"gpus": "8"}) == (RunConfig(gpus=8), [])


@pytest.mark.parametrize("name,text,words", [
    ("gpus", "many", "gpus must be a whole number"),
    ("gpus", "-2", "gpus must be between 1 and 16"),
    ("gpus", "64", "gpus must be between 1 and 16"),
    ("batch_size", "0", "batch_size must be between"),
    ("shuffle", "perhaps", "shuffle must be true or false"),
    ("backend", "tpu", "backend must be one of"),
])
def test_a_bad_value_is_named_and_replaced_by_the_default(name, text, words):
    config, warnings = from_query({name: text, "seed": "5"})
    assert config == RunConfig(seed=5)
    (warning,) = warnings
    assert words in warning and f"Using {name} = " in warning and "\n" not in warning


def test_unknown_parameters_are_reported():
    config, warnings = from_query({"gpu": "8"})
    assert config == RunConfig() and "'gpu' is not a dpviz setting" in warnings[0]


def test_a_repeated_parameter_uses_the_last_value():
    assert from_query({"gpus": ["3", "5"]})[0].gpus == 5


def test_joint_limits_shrink_the_offending_value():
    config, warnings = settle({"data_size": 1_000_000, "batch_size": 1})
    assert config.num_batches <= MAX_BATCHES and config.data_size == 1_000_000
    assert "using batch_size = 100 instead" in warnings[0]
    config, warnings = settle({"data_size": 100_000, "batch_size": 30, "train": True})
    assert config.num_batches == 1_000 and "a training run may have; using batch_size = 100" in warnings[0]
    config, warnings = settle({"data_size": 1_000_000, "input_size": 1024, "batch_size": 1000})
    assert config.data_size * config.input_size <= 16 * 1024 * 1024 and "using data_size" in warnings[0]


def test_a_preset_link_opens_the_preset_and_other_parameters_override_it():
    from dpviz.presets import ALL_PRESETS

    for name, preset in ALL_PRESETS.items():  # DataParallel's and DistributedDataParallel's
        assert from_query({"preset": name}) == (preset.config, [])
    config, warnings = from_query({"preset": "idle-gpus", "gpus": "6"})
    assert warnings == [] and config.gpus == 6
    config, warnings = from_query({"preset": "no-such"})
    assert config == RunConfig(backend="auto") and len(warnings) == 1 and "no-such" in warnings[0]


def test_a_hidden_state_without_a_gru_falls_back_to_a_plain_tensor():
    config, warnings = from_query({"model": "mlp", "inputs": "hidden"})
    assert config.inputs == "tensor" and len(warnings) == 1 and "hidden" in warnings[0]
    config, warnings = from_query({"model": "fancy"})
    assert config.model == "linear" and "model" in warnings[0]


def test_echoed_values_are_cut_and_each_sentence_stays_whole():
    config, warnings = from_query({"preset": "p" * 100_000, "q" * 100_000: "1", "gpus": "9" * 4_000,
                                   "backend": "[x](http://evil.example)" * 5_000})
    assert config == RunConfig(backend="auto") and len(warnings) == 4
    for warning in warnings:
        listed = len(", ".join(LINK_PRESETS)) if "presets (" in warning else 0  # a bad preset's sentence lists them
        assert len(warning) < 300 + listed and "…" in warning and warning.endswith(("ignored.", "instead.")), warning


def test_the_engine_is_a_setting_of_the_link():
    config, warnings = from_query({"engine": "dp", "gpus": "3"})
    assert config.engine == "dp" and to_query(config)["engine"] == "dp" and warnings == []
    config, warnings = from_query({"engine": "tpu"})
    assert config.engine == "dp" and len(warnings) == 1 and "engine must be one of dp" in warnings[0]


def test_an_old_engine_both_link_keeps_ddps_settings_and_reads_as_a_comparison_of_the_first_pair():
    from dpviz.page.link import COMPARE, PAIR, wanted_page, wanted_pair, wants_pair

    params = {"engine": "both", "gpus": "4", "train": "true", "bucket_cap_mb": "0.5"}
    config, warnings = from_query(params)
    assert warnings == [] and wants_pair(params) and config.engine == "ddp" and config.bucket_cap_mb == 0.5
    assert wanted_page(params) == COMPARE and wanted_pair(params) == (PAIR, []) == ((("dp", "ddp")), [])
    query = to_query(config, page=COMPARE, pair=PAIR)
    assert query["engine"] == "compare" and query["engines"] == "dp,ddp" and wants_pair(query)
    assert not wants_pair({"engine": "ddp"}) and not wants_pair({})


@pytest.mark.parametrize("first, second", [("zero1", "fsdp"), ("pipeline", "ddp"), ("fsdp", "dp")])
def test_a_comparison_link_round_trips_with_the_second_engines_settings(first, second):
    from dpviz.page.link import COMPARE, fit_pair, settle, wanted_pair

    config, said = settle({"engine": second, "gpus": 4, "train": True, "model": "mlp", "batch_size": 32})
    query = to_query(config, page=COMPARE, pair=(first, second))
    assert query["engines"] == f"{first},{second}"
    assert from_query(query) == (config, []) and wanted_pair(query) == ((first, second), [])
    (a, b), changed = fit_pair(config, (first, second))
    assert (a.engine, b.engine) == (first, second) and changed is None  # settings both engines run as they are
    from dpviz.config import ENGINE_OPTIONS
    shared = [name for name in config.to_dict() if name not in ENGINE_OPTIONS and name != "engine"]
    assert [getattr(a, name) for name in shared] == [getattr(b, name) for name in shared] == [getattr(config, name) for name in shared]


@pytest.mark.parametrize("text", ["dp,dp", "dp", "dp,ddp,fsdp", "tpu,dp", "x" * 5_000])
def test_a_bad_engines_list_is_one_sentence_and_the_first_pair(text):
    from dpviz.page.link import PAIR, wanted_pair

    pair, warnings = wanted_pair({"engine": "compare", "engines": text})
    assert pair == PAIR and len(warnings) == 1 and "are not two different engines" in warnings[0]
    assert len(warnings[0]) < 400  # the link's text cut short, shown as text
def test_a_zero1_link_keeps_its_engine_and_the_options_it_shares_with_ddp():
    config = RunConfig(engine="zero1", gpus=3, train=True, optimizer="adam", bucket_cap_mb=0.5)
    assert from_query(to_query(config)) == (config, [])
    assert to_query(config)["engine"] == "zero1" and to_query(config)["optimizer"] == "adam"
    config, warnings = from_query({"engine": "zero1", "optimizer": "lamb"})
    assert config == RunConfig(engine="zero1", train=True) and "optimizer must be one of sgd, adam" in warnings[0]


@pytest.mark.parametrize("engine", ["zero1", "fsdp"])
def test_a_bare_link_of_an_engine_whose_lesson_needs_training_opens_training(engine):
    """ZeRO-1's and FSDP's lessons are what a training step holds and moves: their bare link trains, said once; a link
    that names train keeps it."""
    config, warnings = from_query({"engine": engine})
    assert config == RunConfig(engine=engine, train=True)
    assert len(warnings) == 1 and "opens with train = true" in warnings[0]
    assert from_query({"engine": engine, "train": "false"}) == (RunConfig(engine=engine), [])
    assert from_query(to_query(config)) == (config, [])  # the page's own link says train: nothing said again
    assert from_query({"engine": "ddp"}) == (RunConfig(engine="ddp"), [])  # DDP's lesson shows forward only


@pytest.mark.parametrize("engine, gpus", [("tp", 2), ("pipeline", 2), ("pipeline", 4)])
def test_a_bare_link_of_an_engine_the_default_model_cannot_run_opens_on_one_it_can_said_once(engine, gpus):
    """The default model is one Linear: no pipeline stages or tensor-parallel plan cut it. A link naming only the engine
    (and the devices) opens with the engine's own fit of what it did not name, said as its opening: no sentence
    complains about a model the link never named; a link that names that model is told why it was changed."""
    from dpviz.config import ConfigError
    with pytest.raises(ConfigError):
        RunConfig(**{**RunConfig().to_dict(), "engine": engine, "gpus": gpus, "train": True})
    config, warnings = from_query({"engine": engine, "gpus": str(gpus)})
    assert config.model != RunConfig().model and config.gpus == gpus
    assert len(warnings) == 1 and "the link opens with" in warnings[0] and "The link's model" not in warnings[0]
    assert from_query(to_query(config)) == (config, [])  # the page's own link names them: nothing said again
    _, warnings = from_query({"engine": engine, "gpus": str(gpus), "model": "linear"})
    assert any(w.startswith("The link's model linear") for w in warnings)


def test_a_bad_engine_or_preset_lists_what_a_link_may_name():
    _, warnings = from_query({"engine": "nope"})
    from dpviz.engines import ENGINES
    assert f"{', '.join(ENGINES)}, compare, memory" in warnings[0]  # every engine, then every page
    _, warnings = from_query({"preset": "nope"})
    assert all(name in warnings[0] for name in LINK_PRESETS)
