"""RunConfig validates every setting once, with one sentence naming the value and the range."""
import pytest

from dpviz.config import ENGINE_OPTIONS as DDP_ONLY, LIMITS, MAX_BATCHES, ConfigError, RunConfig, parse_setting


def test_defaults_are_the_tutorials():
    config = RunConfig()
    assert (config.input_size, config.output_size, config.batch_size, config.data_size) == (5, 2, 30, 100)
    assert config.shuffle is True and config.num_batches == 4


def home(name: str) -> dict:
    """Where an engine's option applies: its first engine's settings, the tutorial's as its rules fit them (a pipeline
    trains, on a model it can cut); nothing for a setting every engine reads."""
    from dpviz.engines import owners

    if name not in DDP_ONLY:
        return {}
    spec = owners(name)[0]
    values = {**RunConfig().to_dict(), "engine": spec.name, "train": True}
    return {"engine": spec.name, "train": True, **(spec.part("fit")(values) if spec.has("fit") else {})}


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_each_limit_is_enforced_and_named(name):
    low, high = LIMITS[name]
    RunConfig(**{**home(name), name: low})
    for bad in (low - 1, high + 1):
        if name == "batch_size" and bad == high + 1:
            continue  # a batch larger than the data is fine for torch; only the range check applies
        with pytest.raises(ConfigError, match=name) as error:
            RunConfig(**{name: bad})
        assert str(error.value).count(".") >= 1 and "\n" not in str(error.value)


def test_non_integers_and_bad_backend_are_rejected():
    with pytest.raises(ConfigError, match="whole number"):
        RunConfig(gpus=2.5)
    with pytest.raises(ConfigError, match="whole number"):
        RunConfig(gpus=True)
    with pytest.raises(ConfigError, match="backend"):
        RunConfig(backend="tpu")


def test_training_runs_have_a_tighter_batch_limit():
    assert RunConfig(data_size=100_000, batch_size=100, train=True).num_batches == 1_000
    with pytest.raises(ConfigError, match="at most 1,000 when training"):
        RunConfig(data_size=100_000, batch_size=99, train=True)


def test_too_many_batches_names_both_sizes():
    with pytest.raises(ConfigError, match="raise the batch size") as error:
        RunConfig(data_size=1_000_000, batch_size=1_000_000 // MAX_BATCHES - 1)
    assert "1,000,000" in str(error.value)
    assert RunConfig(data_size=1_000_000, batch_size=1_000_000 // MAX_BATCHES).num_batches == MAX_BATCHES


@pytest.mark.parametrize("name,text,value", [
    ("gpus", " 8 ", 8), ("data_size", "1_000", 1000), ("shuffle", "false", False), ("shuffle", "1", True),
    ("backend", "CUDA", "cuda"),
])
def test_parse_setting_reads_text(name, text, value):
    assert parse_setting(name, text) == value


@pytest.mark.parametrize("name,text", [("gpus", "eight"), ("seed", "1.5"), ("shuffle", "maybe"), ("batch_size", "")])
def test_parse_setting_rejects_text_with_one_sentence(name, text):
    with pytest.raises(ConfigError, match=name):
        parse_setting(name, text)
