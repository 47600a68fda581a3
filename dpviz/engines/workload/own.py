"""The user's own module as a run's workload: built from `file.py:build` (or taken as an object), its example
batch, the rows each batch draws from it, and the loss when training.

    work = from_specs("my_model.py:build", example="my_model.py:make_batch", config=config)
    work = from_objects(module, batch, config)          # dpviz.record(module, batch, ...)
    trace = record(work.config, workload=work)           # any engine

Each batch of the run is made of the example's rows: dataset row i is example row i mod n (n the example's
rows), so --batch-size and --data-size make as many batches of any size as the tutorial's data does, and
every value is one the user wrote (token ids stay token ids). Every tensor with n entries along the batch dim
follows the rows; any other object is passed to every call as it is.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import io
import pickle
import sys
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from dpviz.catalogue import OWN
from dpviz.config import ConfigError, RunConfig
from dpviz.engines.workload.memory import module_bytes, nbytes
from dpviz.engines.workload import declared, tutorial_data as tutorial
from dpviz.engines.workload.input_forms import first_tensor, flatten
from dpviz.engines.workload.seeding import seeded
from dpviz.trace.own_model import MAX_LEAVES, ROWS, Args


class OwnModelError(ConfigError):
    """The user's module, batch or loss cannot be run: one sentence naming the cause (exit status 2)."""


# ---- importing the user's code ---------------------------------------------------------------------------

def load(spec: str, what: str, flag: str) -> Callable:
    """The function `spec` names: "path/to/file.py:function" or "package.module:function"."""
    where, _, name = spec.rpartition(":")
    if not where or not name.isidentifier():
        raise OwnModelError(f"{flag} takes FILE.py:FUNCTION or package.module:FUNCTION (the function that returns "
                            f"{what}), got {spec!r}.")
    module = _import(where, flag)
    function = getattr(module, name, None)
    if function is None:
        raise OwnModelError(f"{flag} {spec}: {where} has no {name!r}.")
    if not callable(function):
        raise OwnModelError(f"{flag} {spec}: {name} is a {type(function).__name__}, not a function that returns {what}.")
    return function


def _import(where: str, flag: str) -> Any:
    if where.endswith(".py") or "/" in where or "\\" in where:
        path = Path(where).expanduser().resolve()
        if not path.is_file():
            raise OwnModelError(f"{flag}: no file {where}.")
        digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]  # the same name in every rank
        module_name = f"dpviz_own_{''.join(c if c.isalnum() else '_' for c in path.stem)}_{digest}"
        if module_name in sys.modules:
            return sys.modules[module_name]
        if str(path.parent) not in sys.path:  # the file may import its neighbours, as `python file.py` lets it
            sys.path.insert(0, str(path.parent))
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[module_name] = module  # before running it: pickle and dataclasses find its classes by name
        try:
            loader_spec.loader.exec_module(module)
        except BaseException as error:
            del sys.modules[module_name]
            raise OwnModelError(f"{flag}: importing {where} raised {_said(error)}") from error
        return module
    try:
        return importlib.import_module(where)
    except ModuleNotFoundError as error:
        if error.name and where.startswith(error.name):
            raise OwnModelError(f"{flag}: no module named {where!r} (give a file as path/to/file.py, or run where "
                                f"the package can be imported).") from error
        raise OwnModelError(f"{flag}: importing {where} raised {_said(error)}") from error
    except BaseException as error:
        raise OwnModelError(f"{flag}: importing {where} raised {_said(error)}") from error


def _said(error: BaseException) -> str:
    """An exception as one line: 'NameError: name 'x' is not defined.'"""
    first = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {first}".rstrip(".") + "."


# ---- the batch --------------------------------------------------------------------------------------------

def _is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(obj, "_asdict") and hasattr(obj, "_fields")


def _is_dataclass(obj: Any) -> bool:
    return dataclasses.is_dataclass(obj) and not isinstance(obj, type)


def map_tensors(obj: Any, fn: Callable[[torch.Tensor], Any], into_dataclasses: bool = True) -> Any:
    """`obj` with `fn` applied to every tensor in it, its containers rebuilt as their own types."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, Args):
        return Args(*map_tensors(obj.args, fn), **map_tensors(obj.kwargs, fn))
    if _is_namedtuple(obj):
        return type(obj)(*(map_tensors(item, fn) for item in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(map_tensors(item, fn) for item in obj)
    if isinstance(obj, dict):
        return type(obj)((key, map_tensors(value, fn)) for key, value in obj.items())
    if into_dataclasses and _is_dataclass(obj):
        fields = {f.name: map_tensors(getattr(obj, f.name), fn) for f in dataclasses.fields(obj) if f.init}
        return dataclasses.replace(obj, **fields)
    return obj


def _tensors(obj: Any) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    map_tensors(obj, lambda t: found.append(t))
    return found


def call_of(batch: Any) -> tuple[tuple, dict[str, Any]]:
    """The positional and keyword arguments a batch is passed as: model(batch), or model(*args, **kwargs) for Args."""
    return (batch.args, dict(batch.kwargs)) if isinstance(batch, Args) else ((batch,), {})


def leaves(args: tuple, kwargs: dict[str, Any], rows: int, dim: int) -> tuple[list, list]:
    """The call's leaves as DataParallel's scatter meets them (dpviz.trace.own_model): ROWS, a fixed length, or None."""
    def walk(obj: Any) -> list:
        if isinstance(obj, torch.Tensor):  # one of 0 dims is refused by DataParallel (scatter_problem)
            return [None if obj.dim() <= dim else ROWS if obj.shape[dim] == rows else int(obj.shape[dim])]
        if isinstance(obj, (tuple, list)) and len(obj) > 0:
            return [leaf for item in obj for leaf in walk(item)]
        if isinstance(obj, dict) and len(obj) > 0:
            return [leaf for key, value in obj.items() for leaf in (*walk(key), *walk(value))]
        return [None]
    return [leaf for arg in args for leaf in walk(arg)], [leaf for value in kwargs.values() for leaf in walk(value)]


class RowNumbers(Dataset):
    """`length` dataset rows, each only its number: a batch's rows are taken from the example by number."""

    def __init__(self, length: int):
        self.len = length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return torch.tensor(index), index

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        index = torch.tensor(indices, dtype=torch.long)
        return index, index

    def __len__(self) -> int:
        return self.len


def default_loss(output: Any, batch: Any) -> torch.Tensor:
    """The loss when none is given: the mean of every floating-point tensor of the output, summed (for a
    model that returns its own loss, the mean of the losses DataParallel gathered)."""
    means = [t.float().mean() for t in _tensors(output) if t.is_floating_point()]
    if not means:
        raise TypeError(f"the output ({type(output).__name__}) holds no floating-point tensor to take a loss of; "
                        "give --loss")
    return torch.stack(means).sum()


# ---- the workload ------------------------------------------------------------------------------------------

@dataclasses.dataclass
class OwnWorkload:
    """A run of the user's module: what the engines ask of any workload (dpviz.engines.workload.tutorial_data.Tutorial)."""

    config: RunConfig
    model: nn.Module
    example: Any  # one batch, as the model is called with it (Args for several arguments)
    loss_fn: Callable[[Any, Any], torch.Tensor] = default_loss
    rows: int = 0  # the example's rows along the batch dim

    def __post_init__(self) -> None:
        self.args, self.kwargs = call_of(self.example)
        positional, keywords = leaves(self.args, self.kwargs, self.rows, self.config.dim)
        self.fact = {
            "class": type(self.model).__name__,
            "parameters": sum(p.numel() for p in self.model.parameters()),
            "trainable": sum(p.numel() for p in self.model.parameters() if p.requires_grad),
            "rows": self.rows, "positional": positional, "keywords": keywords,
        }

    # What the engines ask of a workload.
    facts_kind = None  # nothing beyond the outputs: the catalogue's counter and loss models record more
    returns_loss = False

    @property
    def argument_names(self) -> tuple[str, ...]:
        return tuple(f"arg{i}" for i in range(len(self.args))) if isinstance(self.example, Args) else ("batch",)

    def build(self) -> tuple[nn.Module, DataLoader]:
        loader = DataLoader(RowNumbers(self.config.data_size), batch_size=self.config.batch_size,
                            shuffle=self.config.shuffle, generator=torch.Generator().manual_seed(self.config.seed + 1),
                            collate_fn=tutorial._already_batched)
        return self.model, loader

    def batch(self, ids: torch.Tensor) -> Any:
        """The batch of dataset rows `ids`: the example's rows ids mod n, on the device `ids` is on."""
        device, dim, rows = ids.device, self.config.dim, self.rows
        picked = ids.cpu() % rows

        def take(t: torch.Tensor) -> torch.Tensor:
            if t.dim() > dim and t.shape[dim] == rows:
                t = t.index_select(dim, picked.to(t.device))
            return t.to(device)
        return map_tensors(self.example, take)

    def call(self, data: torch.Tensor, ids: list[int]) -> tuple[tuple, dict[str, Any]]:
        return call_of(self.batch(data))

    def loaded_bytes(self, data: torch.Tensor, args: tuple, kwargs: dict) -> int:
        return nbytes(_tensors((args, kwargs)))

    def training_parts(self, model: nn.Module) -> tuple[None, torch.optim.Optimizer]:
        trainable = [p for p in model.parameters() if p.requires_grad]
        kind, settings = tutorial.optimizer_of(self.config)  # the run's --optimizer, as for the catalogue's models
        return None, kind(trainable, **settings)

    def teacher(self) -> None:
        """No teacher: the loss compares the output with the inputs as the user's loss function says."""
        return None

    def target(self, teacher: Any, x: torch.Tensor, args: tuple, kwargs: dict) -> Any:
        return Args(*args, **kwargs) if isinstance(self.example, Args) else args[0]

    def loss(self, output: Any, target: Any) -> torch.Tensor:
        return self.loss_fn(output, target)

    def facts(self) -> dict[str, Any]:
        return {"model": self.fact}

    def described(self) -> str:
        from dpviz.trace.own_model import described

        return described(self.fact)

    def pack(self) -> bytes:
        """The module, the example and the loss as bytes a DDP rank rebuilds this workload from (unpack)."""
        files = sorted({m.__file__ for m in sys.modules.values()
                        if getattr(m, "__name__", "").startswith("dpviz_own_") and getattr(m, "__file__", None)})
        buffer = io.BytesIO()
        try:
            pickle.dump({"model": self.model.cpu(), "example": self.example, "loss": self.loss_fn}, buffer)
        except (pickle.PicklingError, AttributeError, TypeError) as error:
            raise OwnModelError(f"DistributedDataParallel's ranks are processes of their own, so the model, its batch "
                                f"and its loss are sent to them by pickle, which failed: {_said(error)} Define them "
                                "at the top level of a module (not in a function, a notebook or the running script).") from error
        return pickle.dumps({"files": files, "path": list(sys.path), "config": self.config.to_dict(),
                             "rows": self.rows, "payload": buffer.getvalue()})


def unpack(packed: bytes) -> OwnWorkload:
    """In a DDP rank: the workload `OwnWorkload.pack` sent, its files imported under the same names first."""
    sent = pickle.loads(packed)
    for entry in sent["path"]:
        if entry not in sys.path:
            sys.path.append(entry)
    for file in sent["files"]:
        _import(file, "--model")
    try:
        parts = pickle.loads(sent["payload"])
    except (AttributeError, ModuleNotFoundError) as error:
        raise OwnModelError(f"a rank could not rebuild the model: {_said(error)} Its class must be importable by "
                            "name: define it at the top level of a module, not in the running script.") from error
    return OwnWorkload(RunConfig(**sent["config"]), parts["model"], parts["example"], parts["loss"], sent["rows"])


# ---- building and checking, before any run ----------------------------------------------------------------

def from_specs(model: str, example: str | None, loss: str | None, config: RunConfig,
               batch_size_given: bool = False, data_size_given: bool = False) -> OwnWorkload:
    """The workload of `--model FILE.py:build` (`--example`, `--loss`); OwnModelError when it cannot run."""
    build = load(model, "an nn.Module", "--model")
    make_batch = load(example, "one batch of inputs", "--example") if example else None
    loss_fn = load(loss, "a loss", "--loss") if loss else default_loss
    with seeded(config.seed):  # the same weights and example on every rank, and run after run
        module = _called(build, "--model", model)
        if not isinstance(module, nn.Module):
            raise OwnModelError(f"--model {model} returned {_kind(module)}, not a torch.nn.Module.")
        if make_batch is not None:
            batch = _called(make_batch, "--example", example)
        else:  # the tutorial's rows: --batch-size rows of --input-size random features
            batch = torch.randn(config.batch_size, config.input_size)
    return from_objects(module, batch, config, loss_fn, batch_size_given=batch_size_given or make_batch is None,
                        data_size_given=data_size_given)


def _called(function: Callable, flag: str, spec: str) -> Any:
    try:
        return function()
    except Exception as error:
        raise OwnModelError(f"{flag} {spec} raised {_said(error)}") from error


def from_objects(module: Any, batch: Any, config: RunConfig, loss_fn: Callable | None = None, *,
                 batch_size_given: bool = False, data_size_given: bool = False) -> OwnWorkload:
    """The workload of `module` on `batch` under `config` (its engine, devices, training); the batch size is
    the example's rows unless given, the data one batch unless given. OwnModelError when it cannot run."""
    if not isinstance(module, nn.Module):
        raise OwnModelError(f"the model must be a torch.nn.Module, got {_kind(module)}.")
    wrong = declared.problem(module)  # its pipeline_layers or tp_plan naming what it does not hold, whatever the engine
    if wrong:
        raise OwnModelError(wrong)
    args, kwargs = call_of(batch)
    if not args:
        raise OwnModelError("the batch needs at least one positional argument: the model is called as model(batch), "
                            "or model(*args, **kwargs) for dpviz.Args(*args, **kwargs).")
    dim = config.dim
    scattered = first_tensor((args, kwargs))  # the first tensor in the order DataParallel's scatter walks
    found = scattered if scattered is not None else next(iter(_tensors(batch)), None)
    if found is None:
        raise OwnModelError(f"the batch ({_kind(batch)}) holds no tensor, so there are no rows to split.")
    if found.dim() <= dim:
        raise OwnModelError(f"the batch's first tensor is 0-dimensional, so it has no rows along dim {dim}; its rows "
                            "must come first.")
    rows = int(found.shape[dim])
    if rows < 1:
        raise OwnModelError("the batch's first tensor has no rows.")
    parts = len(flatten(args, kwargs, tuple(f"arg{i}" for i in range(len(args)))))
    if parts > MAX_LEAVES:
        raise OwnModelError(f"the batch holds {parts:,} tensors and other objects; a trace records at most {MAX_LEAVES}.")
    values = config.to_dict()
    values.update(model=OWN, inputs=OWN)
    if not batch_size_given:
        values["batch_size"] = rows
    if not data_size_given:
        values["data_size"] = values["batch_size"]
    try:
        config = RunConfig(**values)
    except ConfigError as error:
        raise OwnModelError(str(error)) from None
    work = OwnWorkload(config, module, batch, loss_fn or default_loss, rows)
    _engine_rules(work, scattered)
    _check_memory(work)
    _check_forward(work)
    return work


def _kind(obj: Any) -> str:
    return "None" if obj is None else f"a {type(obj).__module__}.{type(obj).__qualname__}".replace("a builtins.", "a ")


def _engine_rules(work: OwnWorkload, scattered: torch.Tensor | None) -> None:
    """What the run's engine needs of a batch: the engine says (its spec's `own_batch` rule, if any)."""
    from dpviz.engines import ENGINES

    spec = ENGINES[work.config.engine]
    if spec.has("own_batch"):
        problem = spec.part("own_batch")(work, scattered)
        if problem:
            raise OwnModelError(problem)


def scatter_problem(work: OwnWorkload, scattered: torch.Tensor | None) -> str | None:
    """Why DataParallel cannot scatter this batch (a sentence), or None: it splits the tensors in tuples,
    lists, dicts and namedtuples along dim, and hands anything else whole to every device."""
    dim = work.config.dim
    if scattered is None:
        holder = next((type(a).__name__ for a in (*work.args, *work.kwargs.values()) if _is_dataclass(a)), None)
        inside = f"a dataclass ({holder})" if holder else "objects DataParallel does not look into"
        return (f"DataParallel cannot scatter this batch: its tensors are inside {inside}, which nn.DataParallel "
                "hands whole to every device, so every device would run every row; pass them in a tuple, list, dict "
                "or namedtuple.")
    for path, leaf in flatten(work.args, work.kwargs, work.argument_names):
        if isinstance(leaf, torch.Tensor) and leaf.dim() <= dim:
            return (f"DataParallel cannot scatter this batch: {path} is a 0-dimensional tensor, and scatter cuts every "
                    f"tensor along dim {dim}; pass it as a Python number, or give it a row dimension.")
    return None


def available_bytes() -> int:
    """Memory this machine can still give: MemAvailable, within this process's cgroup limit."""
    from dpviz.host_memory import cgroup_limit_bytes, cgroup_usage_bytes

    try:
        with open("/proc/meminfo") as info:
            free = next(int(line.split()[1]) * 1024 for line in info if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return 2**62
    limit, used = cgroup_limit_bytes(), cgroup_usage_bytes()
    return min(free, limit - used) if limit is not None and used is not None else free


def _check_memory(work: OwnWorkload) -> None:
    """Refuse a model whose copies cannot fit the memory left: DataParallel holds one replica per device (and,
    training, a gradient per replica, the summed one and SGD's momentum); a DDP rank its module, its gradient
    buckets, its gradients and the momentum."""
    from dpviz.engines import ENGINES, engine

    config = work.config
    weights = module_bytes(work.model)
    processes = ENGINES[config.engine].processes  # a process per lane, each with its own copy
    copies = config.gpus if processes else config.gpus + 1  # DataParallel: the module and a replica per device
    each = 4 if config.train else 1
    needed = weights * copies * each
    where = "this machine"
    if engine(config.engine).resolve(config).backend == "cuda":  # one copy per GPU: the emptiest must hold it
        free, where = min(torch.cuda.mem_get_info(i)[0] for i in range(config.gpus)), "the emptiest GPU"
        copies, needed = 1, weights * each
    else:
        free = available_bytes()
    if needed > free:
        from dpviz.analysis.wording import human_bytes

        raise OwnModelError(f"the model's parameters and buffers take {human_bytes(weights)}, and {copies} "
                            f"cop{'ies' if copies > 1 else 'y'}{' with gradients and momentum' if config.train else ''} "
                            f"need about {human_bytes(needed)}, but {where} has {human_bytes(free)} left; use fewer "
                            "devices or a smaller model.")


def _check_forward(work: OwnWorkload) -> None:
    """One plain forward of the whole example (and its loss, when training) before the run, its buffers
    (BatchNorm's running statistics) restored after: a model that cannot run its own batch is refused here."""
    model = work.model
    saved = {name: buffer.detach().clone() for name, buffer in model.named_buffers()}
    try:
        with torch.no_grad():
            try:
                output = model(*work.args, **work.kwargs)
            except Exception as error:
                raise OwnModelError(f"the model's forward on the example batch raised {_said(error)}") from error
            if work.config.train:
                try:
                    loss = work.loss(output, work.target(None, None, work.args, work.kwargs))
                except Exception as error:
                    raise OwnModelError(f"the loss, called as loss(output, batch) on the example batch, raised "
                                        f"{_said(error)}") from error
    finally:
        with torch.no_grad():
            for name, buffer in model.named_buffers():
                buffer.copy_(saved[name])
    if work.config.train and not (isinstance(loss, torch.Tensor) and loss.dim() == 0 and loss.is_floating_point()):
        got = f"a tensor of shape {list(loss.shape)}" if isinstance(loss, torch.Tensor) else _kind(loss)
        raise OwnModelError(f"the loss must return a 0-dimensional floating-point tensor, got {got}.")
