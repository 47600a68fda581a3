"""A model's plan: its memory per device and what each device sends per step, under every engine that plans, from
the model's own shapes (the rules of dpviz.engines.plan_rules, each engine's `plan` part).

    plan(model, example, gpus=8, optimizer="adam")          # a module and its example batch
    plan("transformer", gpus=1024, optimizer="adam", size="7b")   # a catalogue model at a size it declares

The document: {"model": {...}, "gpus": G, "optimizer": ..., "engines": {"ddp": {"label": ..., "devices": [{
"parameters": B, "gradients": B, "optimizer state": B, "activations": B, "sent": B}, ...]}, ...}}. Bytes are
whole numbers; "activations" are those of the example batch's rows as the engine spreads them (the global batch).
An engine whose plan reads options of its own says which ("options": {"schedule": "gpipe", ...}); one that cannot
run the model so is {"label": ..., "refused": its sentence}, with no devices. A setting only a plan reads
(plan_settings: tensor parallelism's degree, tp=4 for FSDP over groups of 4) is refused, asked for and not plannable,
with a ValueError (the asker's sentence); the engine then names what it planned ("label": "FSDP × TP", "options":
{"dp_shard": 2, "tp": 4}) and its devices what each collective sends ("collectives").
"""
from __future__ import annotations

from typing import Any

from dpviz.engines import ENGINES
from dpviz.engines.plan_rules import KINDS, ModelShape

DTYPES = ("float32", "bfloat16")
PRECISIONS = ("full", "mixed")  # compute in the parameters' dtype, or in bfloat16 over float32 parameters


def real_sizes() -> list[str]:
    """Every real size a catalogue model declares (dpviz.catalogue.ModelSpec.sizes), each name once."""
    from dpviz.catalogue import sized_models

    return list(dict.fromkeys(size for spec in sized_models().values() for size in spec.sizes))


def engines_that_plan() -> list[str]:
    return [name for name, spec in ENGINES.items() if spec.has("plan")]


def plan_options() -> dict[str, Any]:
    """The engines' own options that their plans read (a plan names them as keyword-only parameters: a pipeline's
    schedule and microbatches), and the settings only a plan reads (a tensor-parallel degree: plan_settings), by
    name, each as its engine declares it (dpviz.engines.spec.Option)."""
    found = {}
    for name in engines_that_plan():
        spec = ENGINES[name]
        found.update({option.name: option for option in _declared(spec) if option.name in _read_by_plan(spec)})
    return found


def plan_settings() -> set[str]:
    """The names of the settings only a plan reads (no run takes them)."""
    return {option.name for name in engines_that_plan() for option in ENGINES[name].plan_settings}


def _declared(spec: Any) -> tuple:
    return (*spec.options, *spec.plan_settings)


def _read_by_plan(spec: Any) -> set[str]:
    import inspect

    return {p.name for p in inspect.signature(spec.part("plan")).parameters.values() if p.kind is p.KEYWORD_ONLY}


def plan_shape(shape: ModelShape, gpus: int, optimizer: str, **options: Any) -> dict[str, Any]:
    """The plan of a measured shape on `gpus` devices with `optimizer`, every engine that plans, each reading those
    of `options` that are its own (unset ones at their defaults). An engine that cannot run the model so is
    {"label": ..., "refused": its sentence}."""
    engines = {}
    for name in engines_that_plan():
        spec = ENGINES[name]
        read = _read_by_plan(spec)  # its own options, at a run's defaults where not given: the plan says which it used
        own = {option.name: option.unset for option in _declared(spec) if option.name in read}
        own.update({key: value for key, value in options.items() if key in read})
        try:
            devices = spec.part("plan")(shape, gpus, optimizer, **own)
        except ValueError as error:
            if any(own.get(o.name, o.unset) != o.unset for o in spec.plan_settings):
                raise  # a plan's own setting, asked for, that cannot be planned: the asker's mistake, not a row
            engines[name] = {"label": spec.label, "refused": str(error)}
            continue
        own = getattr(devices, "options", own)  # what it resolved them to (a degree of 0 made every GPU)
        engines[name] = {"label": getattr(devices, "label", spec.label), "devices": list(devices),
                         "most": {kind: max(d[kind] for d in devices) for kind in KINDS},
                         "fullest": max(sum(d[k] for k in KINDS if k != "sent") for d in devices),
                         **({"options": own} if own else {})}
    return {"model": {"class": shape.name, "parameters": sum(p.numel for p in shape.params),
                      "parameter bytes": shape.parameter_bytes, "buffer bytes": shape.buffer_bytes,
                      "rows": shape.rows, "dtype": shape.dtype, "precision": shape.precision, "units": len(shape.units)},
            "gpus": gpus, "optimizer": optimizer, "engines": engines}


def scaled(shape: ModelShape, rows: int) -> ModelShape:
    """`shape` with its example batch `rows` rows long: what autograd saves, the batch and the output grow with it."""
    import dataclasses

    factor = rows / shape.rows if shape.rows else 0
    grows = shape.saved_bytes - shape.weight_copies  # autocast's copies of the weights do not grow with the rows
    return dataclasses.replace(shape, rows=rows, saved_bytes=round(grows * factor) + shape.weight_copies,
                               input_bytes=round(shape.input_bytes * factor), output_bytes=round(shape.output_bytes * factor),
                               layers=tuple(layer.scaled(factor) for layer in shape.layers),
                               policy=shape.policy and scaled(shape.policy, rows),
                               tensor=shape.tensor and shape.tensor.scaled(factor))


def measure_catalogue(name: str, size: str | None = None, rows: int = 1, input_size: int = 5,
                      output_size: int = 2, dtype: str | None = None, precision: str = "full") -> ModelShape:
    """The shape of a catalogue model (at `size`, on the meta device), measured on `rows` rows: torch, in the
    process that calls it (a page asks a process of its own: dpviz.engines.apart.call_apart)."""
    import torch

    from dpviz.engines.workload.shapes import measure

    model, example = _catalogue(name, size, rows, input_size, output_size)
    return measure(model, example, dtype=None if dtype is None else getattr(torch, dtype), precision=precision,
                   catalogue=name, heads=_heads(name, size))


def _heads(name: str | None, size: str | None) -> int | None:
    """The attention heads a catalogue model holds at `size` (its own build's count when None): what a tensor-parallel
    degree must divide."""
    from dpviz.catalogue import MODEL_SPECS

    if name is None:
        return None
    spec = MODEL_SPECS[name]
    return spec.sizes[size].options.get("heads", spec.tensor.heads) if size else spec.tensor.heads


def plan(model: Any, example: Any = None, *, gpus: int, optimizer: str = "sgd", dtype: str | None = None,
         loss: Any = None, size: str | None = None, rows: int = 8, input_size: int = 5, output_size: int = 2,
         precision: str = "full", **options: Any) -> dict[str, Any]:
    """The plan of `model` (a module, or a catalogue model's name) on `example` (a batch; for a catalogue model,
    `rows` random rows), on `gpus` devices, training with `optimizer` ("sgd" or "adam"), its parameters in `dtype`
    ("float32", "bfloat16" or the model's own), computing in them (`precision` "full") or in bfloat16 over float32
    parameters ("mixed": autocast, FSDP2's MixedPrecisionPolicy). `size` (one the catalogue model declares:
    real_sizes) builds it at that size on the meta device. `options`: the engines' own that their plans read
    (plan_options: schedule="1f1b", microbatches=8). ValueError (one sentence) for a value it cannot plan."""
    import torch

    from dpviz.config import check_setting
    from dpviz.engines.workload.shapes import measure

    for key, value in options.items():
        if key not in plan_options():
            raise ValueError(f"{key} is no setting a plan reads; it reads {', '.join(plan_options())}.")
        if key in plan_settings():
            _check_whole(plan_options()[key], value)
        else:
            check_setting(key, value)
    catalogue = model if isinstance(model, str) else None
    if optimizer not in ("sgd", "adam"):
        raise ValueError(f"optimizer must be sgd or adam, got {optimizer!r}.")
    if not isinstance(gpus, int) or isinstance(gpus, bool) or not 1 <= gpus <= 1024:
        raise ValueError(f"gpus must be a whole number from 1 to 1,024, got {gpus!r}.")
    if dtype is not None and dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}.")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}.")
    if precision == "mixed" and dtype == "bfloat16":
        raise ValueError("precision mixed keeps the parameters in float32 beside bfloat16 compute, so it takes no "
                         "dtype bfloat16 (alone, that plans pure bfloat16 training).")
    if isinstance(model, str):
        model, example = _catalogue(model, size, rows, input_size, output_size)
    elif size is not None:
        raise ValueError("size builds a catalogue model at a real size; a module of your own has its own size.")
    if example is None:
        raise ValueError("a module of your own needs an example batch to plan its activations.")
    shape = measure(model, example, loss, dtype=None if dtype is None else getattr(torch, dtype), precision=precision,
                    catalogue=catalogue, heads=_heads(catalogue, size))
    return plan_shape(shape, gpus, optimizer, **options)


def _check_whole(option: Any, value: Any) -> None:
    low, high = option.limits
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{option.name} must be a whole number from {low:,} to {high:,}, got {value!r}.")


def _catalogue(name: str, size: str | None, rows: int, input_size: int, output_size: int) -> tuple[Any, Any]:
    import torch

    from dpviz.catalogue import MODEL_SPECS, sized_models
    from dpviz.engines.workload.models import build_model, build_real, random_rows

    if name not in MODEL_SPECS or not MODEL_SPECS[name].listed:
        raise ValueError(f"model must be one of the catalogue's ({', '.join(n for n, s in MODEL_SPECS.items() if s.listed)}), "
                         f"got {name!r}.")
    if size is None:
        model, _ = build_model(name, input_size, output_size)
        return model, random_rows(name, input_size, rows)
    if size not in MODEL_SPECS[name].sizes:
        sized = sized_models()
        have = "; ".join(f"{', '.join(spec.sizes)} for model {model}" for model, spec in sized.items())
        raise ValueError(f"size is one of {have}; got model {name!r}, size {size!r}.")
    with torch.device("meta"):  # nothing is allocated
        return build_real(name, size, rows)
