"""How dpviz cuts a model into units, and which of its parameters several modules share: FSDP shards each unit on
its own before the root (dpviz.engines.fsdp), and a plan of the model follows the same policy
(dpviz.engines.workload.shapes)."""
from __future__ import annotations

from torch import nn


TIED = " = "  # between the names of one parameter that several modules share, in a sharded module's params


def shard_units(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The modules sharded one by one before the root, (name, module) in the order FSDP2 meets them: each block
    of an nn.ModuleList that holds parameters, otherwise each module with parameters of its own (with its
    children's)."""
    units: list[tuple[str, nn.Module]] = []

    def walk(prefix: str, module: nn.Module) -> None:
        for name, child in module.named_children():
            path = f"{prefix}{name}"
            if isinstance(module, nn.ModuleList) and any(True for _ in child.parameters()):
                units.append((path, child))
            elif any(True for _ in child.parameters(recurse=False)):
                # Whole, with its children: a module that holds parameters may use its children's directly, not
                # through their forward (nn.MultiheadAttention reads out_proj.weight), and FSDP2 gathers a
                # sharded module's parameters only around its own forward.
                units.append((path, child))
            else:
                walk(f"{path}.", child)

    walk("", model)
    return _tied_together(model, units)


def _tied_together(model: nn.Module, units: list[tuple[str, nn.Module]]) -> list[tuple[str, nn.Module]]:
    """`units`, where units that share a parameter (a language model's output layer tied to its embedding) are
    replaced by their lowest common ancestor, sharded whole: FSDP2 refuses a parameter in two groups. When that
    ancestor is the model itself, the root's group holds them."""
    while True:
        owner: dict[int, int] = {}
        shared = None
        for at, (_, unit) in enumerate(units):
            for parameter in unit.parameters():
                if owner.setdefault(id(parameter), at) != at:
                    shared = (owner[id(parameter)], at)
                    break
            if shared:
                break
        if shared is None:
            return units
        names = [units[at][0].split(".") for at in shared]
        common = []
        for parts in zip(*names):
            if len(set(parts)) > 1:
                break
            common.append(parts[0])
        ancestor = ".".join(common)
        inside = [(name, unit) for name, unit in units if ancestor and (name == ancestor or name.startswith(ancestor + "."))
                  or not ancestor and name in {units[at][0] for at in shared}]
        first = min(units.index(unit) for unit in inside)
        units = [unit for unit in units if unit not in inside]
        if ancestor:  # the ancestor sharded whole, where its first unit stood
            units.insert(first, (ancestor, model.get_submodule(ancestor)))


def tied_groups(model: nn.Module) -> list[list[str]]:
    """The names each parameter shared between modules goes by (["embed.weight", "out.weight"]), one list each."""
    names: dict[int, list[str]] = {}
    for module_name, module in model.named_modules(remove_duplicate=False):
        for name, parameter in module.named_parameters(recurse=False, remove_duplicate=False):
            names.setdefault(id(parameter), []).append(f"{module_name}.{name}" if module_name else name)
    return [sorted(set(found)) for found in names.values() if len(set(found)) > 1]
