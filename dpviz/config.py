"""RunConfig: the validated settings of one run of the DataParallel tutorial.

Every value from a widget, a URL, a flag or a file passes through `RunConfig.validated` (or
`parse_config`) once; past that point the rest of dpviz trusts it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

import math

from dpviz.catalogue import INPUT_SPECS, MODEL_SPECS, OWN, row_elements, row_text
from dpviz.echo import cut, echo
from dpviz.engines import ENGINES as ENGINE_SPECS, declared, needs, options as engine_options

BACKENDS = ("auto", "cuda", "simulated", "cpu")  # the kind of device: resolved once; cpu is simulated for dp, gloo for ddp
ENGINE_NAMES = tuple(ENGINE_SPECS)  # what runs the model over the lanes: dpviz.engines
# The model each replica runs and how a batch is handed to it: dpviz.catalogue's registries.
# A run of the user's own module (model and inputs OWN) is not one of them: a link or a widget cannot ask for it.
MODELS = tuple(name for name, spec in MODEL_SPECS.items() if spec.listed)
INPUTS = tuple(name for name, spec in INPUT_SPECS.items() if spec.listed)
RNN_MODELS = tuple(name for name, spec in MODEL_SPECS.items() if spec.recurrent)
# Settings only some engines read, each declared in its engine's package (its options dataclass): their widgets,
# flags, limits and choices follow from there; a config of another engine holds them at their unset values.
ENGINE_OPTIONS = engine_options()
_DECLARED = declared()
CHOICES = {"engine": ENGINE_NAMES, "backend": BACKENDS, "model": MODELS, "inputs": INPUTS,
           **{name: o.choices for name, o in _DECLARED.items() if o.kind == "choice"}}

# (minimum, maximum) for every integer setting. The bounds keep a run small enough for a hosted
# page with 690 MB of memory while covering real use: a million rows, sixteen devices.
LIMITS: dict[str, tuple[int, int]] = {
    "input_size": (1, 1024),
    "output_size": (1, 1024),
    "batch_size": (1, 1_000_000),
    "data_size": (1, 1_000_000),
    "gpus": (1, 16),
    "seed": (0, 2**32 - 1),
    **{name: o.limits for name, o in _DECLARED.items() if o.kind == "whole"},
}
# Settings that take a fraction, or None for the engine's own default (DDP's bucket size cap in MiB).
FLOAT_LIMITS: dict[str, tuple[float, float]] = {name: o.limits for name, o in _DECLARED.items() if o.kind == "mib"}
FLAGS = ("shuffle", "train", *(name for name, o in _DECLARED.items() if o.kind == "flag"))
# One DataParallel call (a thread per replica) per batch: beyond this a run takes minutes and its
# trace outgrows a small hosted machine, so ask for a bigger batch. Training adds a backward pass and
# a step per batch, so it gets a tenth of that.
MAX_BATCHES = 10_000
MAX_TRAIN_BATCHES = 1_000
# data_size * input_size floats held in memory at once (64 MiB of float32).
MAX_DATASET_ELEMENTS = 16 * 1024 * 1024


class ConfigError(ValueError):
    """A setting is out of range; the message is one sentence naming the value and what is allowed."""


@dataclass(frozen=True, init=False)
class RunConfig:
    """What to run: the tutorial's parameters (defaults as published) plus device count, backend and engine, and
    the engine's own settings (`options`, a dataclass its package declares: DDP's bucket cap, FSDP's resharding).

    Built from flat settings, its engine's options among them: RunConfig(engine="ddp", gpus=4, bucket_cap_mb=0.001).
    An option is read as config.bucket_cap_mb; another engine's option reads as its unset value (None here), and
    one given a value is refused in a sentence naming the engine it belongs to. to_dict() is flat again: the
    common settings, then every engine's options (a trace file's and a link's form)."""

    input_size: int = 5
    output_size: int = 2
    batch_size: int = 30
    data_size: int = 100
    gpus: int = 2
    shuffle: bool = True
    seed: int = 0
    backend: str = "auto"
    train: bool = False  # forward only, as the tutorial; True adds loss, backward and an optimizer step
    model: str = "linear"  # the tutorial's nn.Linear; see dpviz.engines.workload.models for the others
    inputs: str = "tensor"  # model(x) as in the tutorial; see dpviz.engines.workload.input_forms for tuple, dict, kwargs, ...
    engine: str = "dp"  # nn.DataParallel; see dpviz.engines
    options: Any = None  # the engine's own settings (its spec's options_type), None for an engine with none

    def __init__(self, *, options: Any = None, **settings: Any) -> None:
        common = {f.name for f in dataclasses.fields(self)} - {"options"}
        unknown = sorted(set(settings) - common - set(ENGINE_OPTIONS))
        if unknown:
            raise TypeError(f"RunConfig got an unexpected setting {unknown[0]!r}")
        for f in dataclasses.fields(self):
            if f.name != "options":
                object.__setattr__(self, f.name, settings.get(f.name, f.default))
        check_setting("engine", self.engine)
        kind = ENGINE_SPECS[self.engine].options_type
        if options is not None and (kind is None or not isinstance(options, kind)):  # another engine's (a replace()
            settings = {**dataclasses.asdict(options), **settings}  # of the engine): its values, checked as given
            options = None
        given = {name: value for name, value in settings.items() if name in ENGINE_OPTIONS}
        for name, value in given.items():  # another engine's options stay unset
            if (kind is None or name not in {f.name for f in dataclasses.fields(kind)}) and value != ENGINE_OPTIONS[name]:
                raise ConfigError(f"{needs(name)}, got engine {self.engine!r}.")
        if kind is not None:
            base = options if isinstance(options, kind) else kind()
            own = {f.name for f in dataclasses.fields(kind)}
            options = dataclasses.replace(base, **{name: value for name, value in given.items() if name in own})
        object.__setattr__(self, "options", options)
        self.__post_init__()

    def __getattr__(self, name: str) -> Any:
        """An engine option, read from `options`; another engine's reads as its unset value."""
        if name.startswith("__") or name == "options":
            raise AttributeError(name)
        options = self.__dict__.get("options")
        if options is not None and hasattr(options, name):
            return getattr(options, name)
        if name in ENGINE_OPTIONS:
            return ENGINE_OPTIONS[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __post_init__(self) -> None:
        for name, value in self.to_dict().items():
            if not (name in ("model", "inputs") and value == OWN):  # recorded from a module
                check_setting(name, value)
        if (self.model == OWN) != (self.inputs == OWN):
            raise ConfigError(f"model {OWN} and inputs {OWN} go together (a module of your own and its example "
                              f"batch), got model {echo(self.model)} with inputs {echo(self.inputs)}.")
        if self.num_batches > self.max_batches:
            raise ConfigError(
                f"data_size {self.data_size:,} with batch_size {self.batch_size:,} makes "
                f"{self.num_batches:,} batches; dpviz runs at most {self.max_batches:,}"
                f"{' when training' if self.train else ''}, so raise the batch size."
            )
        if self.data_size * self.row_elements > MAX_DATASET_ELEMENTS:
            raise ConfigError(
                f"data_size {self.data_size:,} rows of {self.row_elements:,} numbers ({self.row_text}) make "
                f"{self.data_size * self.row_elements:,} numbers; the limit is {MAX_DATASET_ELEMENTS:,}."
            )
        self._check_engine_options()
        if INPUT_SPECS[self.inputs].recurrent_only and self.model not in RNN_MODELS:
            raise ConfigError(
                f"inputs hidden passes a GRU's hidden state, so it needs model {' or '.join(RNN_MODELS)}, got {self.model!r}."
            )
        forms = MODEL_SPECS[self.model].inputs
        if forms and self.inputs not in forms:
            raise ConfigError(f"model {self.model} takes token ids, which inputs {self.inputs} would scale into "
                              f"numbers that are no ids; it takes inputs {' or '.join(forms)}.")

    def _check_engine_options(self) -> None:
        engine = ENGINE_SPECS[self.engine]
        problem = engine.part("config_problem")(self) if engine.has("config_problem") else None
        if problem:
            raise ConfigError(problem)

    @property
    def dim(self) -> int:
        return batch_dim(self.model)

    @property
    def row_elements(self) -> int:
        """Numbers in one row of data: what the dataset-size limit counts."""
        return row_elements(self.model, self.input_size)

    @property
    def row_text(self) -> str:
        return row_text(self.model, self.input_size)

    @property
    def max_batches(self) -> int:
        return MAX_TRAIN_BATCHES if self.train else MAX_BATCHES

    @property
    def num_batches(self) -> int:
        """Batches of the run: DataParallel's DataLoader batches, or DDP's steps (every rank has as many)."""
        return ENGINE_SPECS[self.engine].part("batches")(self)

    def to_dict(self) -> dict[str, Any]:
        """Every setting by name, flat: the common ones, then every engine's options (this engine's as set)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "options"}
        return {**values, **{name: getattr(self, name) for name in ENGINE_OPTIONS}}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "RunConfig":
        """Build from already-typed values (a trace file); unknown keys are an error."""
        known = ({f.name for f in dataclasses.fields(cls)} - {"options"}) | set(ENGINE_OPTIONS)
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown setting {echo(unknown[0])}; known settings are {', '.join(sorted(known))}.")
        return cls(**values)


def batch_dim(model: str) -> int:
    """The dim of `model`'s input that holds the batch: DataParallel's `dim` for it."""
    return MODEL_SPECS[model].dim


def check_setting(name: str, value: Any) -> None:
    """Raise ConfigError unless `value` suits setting `name` on its own (limits between settings aside)."""
    if name in FLOAT_LIMITS:
        low, high = FLOAT_LIMITS[name]
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not low <= value <= high:
            raise ConfigError(f"{name} must be a number of MiB from {low:g} to {high:g} (or none for the default), "
                              f"got {echo(value)}.")
    elif name in LIMITS:
        low, high = LIMITS[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{name} must be a whole number, got {echo(value)}.")
        if not low <= value <= high:
            raise ConfigError(f"{name} must be between {low:,} and {high:,}, got {cut(f'{value:,}')}.")
    elif name in FLAGS:
        if not isinstance(value, bool):
            raise ConfigError(f"{name} must be true or false, got {echo(value)}.")
    elif name in CHOICES:
        if value not in CHOICES[name]:
            raise ConfigError(f"{name} must be one of {', '.join(CHOICES[name])}, got {echo(value)}.")
    else:
        raise ConfigError(f"unknown setting {echo(name)}.")


def parse_int(name: str, text: str) -> int:
    """Parse one integer setting from text (a flag or a URL), naming it in the error."""
    try:
        return int(str(text).strip().replace("_", ""), 10)
    except ValueError:
        low, high = LIMITS[name]
        raise ConfigError(f"{name} must be a whole number between {low:,} and {high:,}, got {echo(text)}.") from None


def parse_bool(name: str, text: str) -> bool:
    """Parse true/false from text as a URL or a form would write it."""
    lowered = str(text).strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be true or false, got {echo(text)}.")


def parse_float(name: str, text: str) -> float | None:
    """Parse a setting that takes a fraction, or none / default / nothing for the engine's default."""
    stripped = str(text).strip().lower()
    if stripped in ("", "none", "default"):
        return None
    try:
        value = float(stripped.replace("_", ""))
    except ValueError:
        low, high = FLOAT_LIMITS[name]
        raise ConfigError(f"{name} must be a number of MiB from {low:g} to {high:g} (or none), got {echo(text)}.") from None
    return value


def parse_setting(name: str, text: str) -> Any:
    """Parse one setting from its text form; the single place that knows each setting's type."""
    if name in FLOAT_LIMITS:
        return parse_float(name, text)
    if name in LIMITS:
        return parse_int(name, text)
    if name in FLAGS:
        return parse_bool(name, text)
    if name in CHOICES:
        return str(text).strip().lower()
    raise ConfigError(f"unknown setting {echo(name)}.")
