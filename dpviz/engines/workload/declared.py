"""What a built model declares of how it is split, read and checked against the model itself: a catalogue model's
declaration (dpviz.catalogue.ModelSpec), or a user's module's own optional attributes. Engines ask here, by the
catalogue's name or None for a module of one's own, and never name a model.

    layers(model, "mlp")           # [("net.0", <Linear>), ...]: the layers a pipeline's stages take, in order
    layers(module, None)           # its `pipeline_layers`, else an nn.Sequential's children
    tensor_plan(model, None)       # its `tp_plan` ({"net.0": "colwise", "net.2": "rowwise"}), checked
    problem(module)                # why what a user's module declares is wrong (one sentence), or None

A user's module may declare, as attributes or as methods returning them:
  pipeline_layers: the names of its modules (as named_modules() gives them, "blocks.*" for each child of blocks) that
      forward runs one after another, each taking the one tensor the last gave; default: an nn.Sequential's children.
  tp_plan: module path (wildcards allowed) to "colwise", "rowwise" or "whole", each an nn.Linear; no default, since
      which Linears pair up depends on what forward does between them.
"""
from __future__ import annotations

from typing import Any

from torch import nn

from dpviz.catalogue import MODEL_SPECS
from dpviz.splitting import GROUP, SHARED, STYLES, expand, matches

NOT_SEQUENTIAL = ("your model is a {cls}, not an nn.Sequential, so a pipeline cannot tell its layers apart; put the "
                  "layers it runs one after another in an nn.Sequential, or list their names in a pipeline_layers "
                  "attribute.")


def _own(model: nn.Module, attribute: str) -> Any:
    """A user's module's declaration: the attribute, or what the method of that name returns."""
    value = getattr(model, attribute, None)
    if not callable(value) or isinstance(value, nn.Module):
        return value
    try:
        return value()
    except Exception as error:  # the user's own code: its error in one line, not a traceback
        first = (str(error).strip().splitlines() or [""])[0]
        raise ValueError(f"your model's {attribute}() raised {type(error).__name__}: {first}".rstrip(".") + ".") from None


def layers(model: nn.Module, catalogue: str | None) -> list[tuple[str, nn.Module]]:
    """The model's layers for a pipeline, in order, each with its name: as its declaration names them, a group
    built by the model (its `pipeline_layer(name)`). ValueError (one sentence) when it declares none, or names what
    the model does not hold, or its layers do not hold each of its parameters exactly once."""
    if catalogue is not None:
        spec = MODEL_SPECS[catalogue]
        if not spec.pipeline.layers:
            raise ValueError(f"model {catalogue} {spec.pipeline.why_not}, so it cannot be cut into pipeline stages.")
        declared, whose = spec.pipeline.layers, f"model {catalogue}'s declaration"
    else:
        declared, whose = _own(model, "pipeline_layers"), "pipeline_layers"
        if declared is None:
            if not isinstance(model, nn.Sequential):
                raise ValueError(NOT_SEQUENTIAL.format(cls=type(model).__name__))
            return list(model.named_children())
        if isinstance(declared, str) or not isinstance(declared, (list, tuple)) or not declared \
                or not all(isinstance(name, str) for name in declared):
            raise ValueError(f"pipeline_layers must be a non-empty list of your model's module names, got "
                             f"{_shown(declared)}.")
    modules = dict(model.named_modules())
    found = []
    for pattern in declared:
        names = expand([pattern], [path for path in modules if path])
        if not names:
            raise ValueError(f"{whose} names {pattern!r}, which matches no module of your {type(model).__name__}.")
        found += [(name, _layer(model, modules, name, whose)) for name in names]
    _cover(model, found, whose)
    return found


def _layer(model: nn.Module, modules: dict[str, nn.Module], name: str, whose: str) -> nn.Module:
    if name in modules and name:
        return modules[name]
    parts = name.split(GROUP)
    if len(parts) > 1 and all(part in modules for part in parts) and hasattr(model, "pipeline_layer"):
        return model.pipeline_layer(name)
    raise ValueError(f"{whose} names {name!r}, which is no module of your {type(model).__name__}; name its modules as "
                     "named_modules() gives them, such as 'net.0'.")


def _cover(model: nn.Module, found: list[tuple[str, nn.Module]], whose: str) -> None:
    """Each parameter in exactly one layer: a stage holds, trains and steps its own."""
    names = {id(p): name for name, p in model.named_parameters()}
    owner: dict[int, str] = {}
    for layer, module in found:
        for p in dict.fromkeys(module.parameters()):
            if id(p) in owner:
                raise ValueError(f"{whose} puts {names.get(id(p), 'a parameter')} in both {owner[id(p)]!r} and "
                                 f"{layer!r}; each parameter must be in one layer only.")
            owner[id(p)] = layer
    left = [name for key, name in names.items() if key not in owner]
    if left:
        raise ValueError(f"{whose} leaves out {left[0]}{f' and {len(left) - 1} more' if len(left) > 1 else ''}; the "
                         "layers must hold every parameter of the model.")


def tensor_plan(model: nn.Module, catalogue: str | None) -> dict[str, str]:
    """The model's tensor-parallel plan (module path to "colwise", "rowwise" or "whole"), each path checked to name
    nn.Linears of the model, each Linear once. ValueError (one sentence) when it has none or it is wrong."""
    if catalogue is not None:
        spec = MODEL_SPECS[catalogue]
        if not spec.tensor.styles:
            raise ValueError(f"model {catalogue} {spec.tensor.why_not}, so it has no tensor-parallel plan.")
        plan, whose = spec.tensor.styles, f"model {catalogue}'s tensor-parallel plan"
    else:
        plan, whose = _own(model, "tp_plan"), "tp_plan"
        if plan is None:
            raise ValueError(f"your {type(model).__name__} declares no tp_plan (a dict of module path to 'colwise', "
                             "'rowwise' or 'whole'), and no plan is sound without one: which Linears pair up depends "
                             "on what its forward does between them.")
        if not isinstance(plan, dict) or not plan:
            raise ValueError(f"tp_plan must be a non-empty dict of module path to 'colwise', 'rowwise' or 'whole', got "
                             f"{_shown(plan)}.")
    modules = dict(model.named_modules())
    named: dict[str, str] = {}
    for path, style in plan.items():
        if not isinstance(path, str) or style not in STYLES:
            raise ValueError(f"{whose} gives {_shown(path)} {_shown(style)}; each module path is 'colwise', "
                             "'rowwise', 'whole' or 'shared_input'.")
        hits = [name for name in modules if name and matches(path, name)]
        if not hits:
            raise ValueError(f"{whose} names {path!r}, which matches no module of your {type(model).__name__}.")
        if style == SHARED:  # any module: what it takes is made one replicated input for the Linears inside
            continue
        for name in hits:
            if not isinstance(modules[name], nn.Linear):
                raise ValueError(f"{whose} names {name!r}, a {type(modules[name]).__name__}, not an nn.Linear; "
                                 "torch's ColwiseParallel and RowwiseParallel cut Linears.")
            if name in named:
                raise ValueError(f"{whose} names {name!r} twice ({named[name]!r} and {path!r}).")
            named[name] = path
    return dict(plan)


def problem(model: nn.Module) -> str | None:
    """Why what a user's module declares of how it is split is wrong (one sentence), or None: each attribute it
    has, checked against the module (those it lacks are no problem until an engine needs them)."""
    try:
        if _own(model, "pipeline_layers") is not None:
            layers(model, None)
        if _own(model, "tp_plan") is not None:
            tensor_plan(model, None)
    except ValueError as error:
        return str(error)
    return None


def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, (str, int, float)) or value is None else f"a {type(value).__name__}"
    return text if len(text) <= 60 else text[:57] + "..."
