"""Command line: run the DataParallel tutorial (or any other engine), print its log, write the trace files.

`dpviz` (the installed command) and `python -m dpviz` are the same command (dpviz/command.py starts both):

    python -m dpviz --batch-size 30 --data-size 100 --gpus 8 --trace run.json --chrome-trace run.perfetto.json
    python -m dpviz --model gru_dim1 --inputs hidden --gpus 3
    python -m dpviz --preset kwargs-small-batch
    python -m dpviz --engine ddp --gpus 4 --train --bucket-cap-mb 0.0001 --trace run.json
    torchrun --nnodes 2 --node-rank 0 --nproc-per-node 2 --master-addr HOST --master-port 29500 \
        -m dpviz --engine ddp --train --trace run.json

A bad value prints one line on stderr and exits with status 2. A run that DataParallel (or a DDP rank)
itself fails (a pitfall) prints the log up to the error, writes the trace files, and exits with status 1.
Under torchrun this process is one rank: rank 0 prints the log and writes the files, the others are quiet.
"""
from __future__ import annotations

import argparse
import os
import re
import secrets
import sys
from pathlib import Path
from typing import Callable, NoReturn, Sequence

from dpviz import __version__
from dpviz.commands import COMMANDS
from dpviz.exports import chrome_trace
from dpviz.trace import json_io as trace_json
from dpviz.catalogue import INPUT_SPECS, MODEL_SPECS, OWN
from dpviz.cli_types import setting as _setting
from dpviz.config import (
    BACKENDS, CHOICES, ENGINE_NAMES, FLOAT_LIMITS, INPUTS, LIMITS, MAX_BATCHES, MAX_DATASET_ELEMENTS, MAX_TRAIN_BATCHES, MODELS,
    ConfigError, ENGINE_OPTIONS, RunConfig,
)
from dpviz.echo import one_line
from dpviz.presets import ALL_PRESETS, DDP_PRESETS, PRESETS, SHARDED_PRESETS, presets_of
from dpviz.engines import ENGINES, Option, needs, owners, vocabulary
from dpviz.engines.ranks import torchrun as _torchrun
from dpviz.engines.ranks.torchrun import under_torchrun
from dpviz.engines.run import record, resolve
from dpviz.stopping import Stopped, stop_on_signals
from dpviz.exports.tutorial_log import tutorial_log
from dpviz.analysis.wording import plural

DEFAULTS = RunConfig()
SHOWN_VALUE = 80  # characters of a refused value an error message quotes


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, no usage block: the message says it all
        # argparse quotes a refused value whole ("invalid choice: '...'", "unrecognized arguments: ..."):
        # escape control characters so a terminal shows them rather than acts on them, and cut long words.
        message = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
        message = re.sub(r"'([^']{%d})[^']+'" % SHOWN_VALUE, r"'\1…'", message)
        message = re.sub(r"([^\s']{%d})[^\s']+" % SHOWN_VALUE, r"\1…", message)
        self.exit(2, f"{self.prog}: {message}\n")


def _preset(name: str) -> str:
    """A preset's name; argparse's own refusal would list every preset, a line that grows with each one."""
    if name not in ALL_PRESETS:
        raise argparse.ArgumentTypeError(f"invalid choice: '{name}' ({len(ALL_PRESETS)} presets, listed by --help)")
    return name


def _limits(name: str, default: object = None) -> str:
    low, high = LIMITS[name]
    return f"{low:,} to {high:,}; default {getattr(DEFAULTS, name) if default is None else default}"


PROG = "python -m dpviz"  # how messages name the command; the installed `dpviz` command names itself


def _other_engines() -> str:
    """What --engine chooses beyond the tutorial's DataParallel, every engine in the registry named with what it runs
    and how many processes it starts, in its own word for them."""
    others = [spec for spec in ENGINES.values() if spec.processes]  # each says "one process per ..." below
    if not others:
        return ""
    names = ", ".join(spec.name for spec in others[:-1]) + (" or " if len(others) > 1 else "") + others[-1].name
    runs = "; ".join(f"{spec.name}: the real {spec.runs}, one process per {vocabulary(spec.name).lane_noun}"
                     for spec in others)
    return (f"With --engine {names} the same model runs under torch's own code ({runs}; gloo on the CPU, NCCL with "
            "a GPU per process), also under torchrun across machines.")


def _process_lanes() -> str:
    """'with --engine ddp, zero1, fsdp or pipeline, its stages or ranks': what --gpus counts under an engine that
    starts a process per lane, in the engines' own words (their vocabularies' lane nouns), the most engines' last."""
    names = [name for name, spec in ENGINES.items() if spec.processes]
    words = [f"{vocabulary(name).lane_noun}s" for name in names]
    nouns = sorted(dict.fromkeys(words), key=words.count)
    listed = ", ".join(names[:-1]) + (" or " if len(names) > 1 else "") + names[-1]
    return f"with --engine {listed}, its {' or '.join(nouns)}"


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = _Parser(
        prog=prog,
        allow_abbrev=False,  # --gpu must not pass for --gpus: a preset is overridden only by options named in full
        description="Run PyTorch's DataParallel tutorial (nn.Linear under nn.DataParallel on random data), print the "
        "sizes each replica saw as the tutorial does, and record the run as a trace. Without enough GPUs the "
        "devices are simulated by CPU threads that follow DataParallel's rules exactly. " + _other_engines() +
        " More commands: "
        + "; ".join(f"'{prog} {name}' {words} ('{prog} {name} --help')" for name, (_, words) in COMMANDS.items()) + ".",
        epilog=f"Limits: at most {MAX_BATCHES:,} batches per run ({MAX_TRAIN_BATCHES:,} with --train) and "
        f"data_size x (numbers per row) at most {MAX_DATASET_ELEMENTS:,}. Models: "
        + "; ".join(f"{m}: {MODEL_SPECS[m].label}" for m in MODELS) + ". Inputs: "
        + "; ".join(f"{f}: {INPUT_SPECS[f].label}" for f in INPUTS) + ". Presets: " + ", ".join(PRESETS)
        + " (DataParallel's); " + ", ".join(DDP_PRESETS) + " (DistributedDataParallel's); "
        + ", ".join(SHARDED_PRESETS) + " (where the memory goes: DDP, ZeRO-1, FSDP)"
        + ". Exit status 2 means a bad option, 1 that DataParallel or a DDP rank raised during the run.",
    )
    add = parser.add_argument
    add("--version", action="version", version=f"dpviz {__version__}")
    add("--batch-size", type=_setting("batch_size"), default=DEFAULTS.batch_size,
        help=f"rows per batch ({_limits('batch_size')}); with --engine ddp the global batch: each rank loads "
        "ceil(batch size / ranks) rows a step")
    add("--data-size", type=_setting("data_size"), default=DEFAULTS.data_size, help=f"rows in the random dataset ({_limits('data_size')})")
    add("--gpus", type=_setting("gpus"), default=DEFAULTS.gpus,
        help=f"devices to spread each batch over ({_limits('gpus')}); {_process_lanes()}: one process each, "
        "GPUs only with backend cuda. Under torchrun, the world size (leave it out, or give the same number)")
    add("--input-size", type=_setting("input_size"), default=DEFAULTS.input_size, help=f"features per row ({_limits('input_size')})")
    add("--output-size", type=_setting("output_size"), default=DEFAULTS.output_size, help=f"outputs per row ({_limits('output_size')})")
    add("--seed", type=_setting("seed"), default=DEFAULTS.seed, help=f"seed for data, weights and order ({_limits('seed')})")
    add("--no-shuffle", action="store_true", help="keep the dataset order (the tutorial shuffles)")
    add("--train", action="store_true",
        help="after each forward, an MSE loss on the output device, backward through DataParallel and an optimizer step (--optimizer) "
        "(the tutorial runs forward only); with --engine ddp, every rank's own loss and backward, its gradients "
        "all-reduced bucket by bucket, then its own optimizer step")
    add("--backend", type=_setting("backend"), choices=BACKENDS, default=DEFAULTS.backend,
        help="cuda: the real nn.DataParallel; simulated: CPU stand-ins; auto (default): cuda when the machine has at "
        "least --gpus GPUs and --gpus >= 2. With --engine ddp: cuda runs NCCL with one process per GPU, cpu (or "
        "simulated) runs gloo on processes on the CPU, auto takes cuda when there is a GPU per rank")
    add("--engine", type=_setting("engine"), choices=ENGINE_NAMES, default=DEFAULTS.engine,
        help="what spreads the batch over the devices: " + "; ".join(f"{name}, {spec.runs}" for name, spec in ENGINES.items()))
    added = set()
    for spec in ENGINES.values():  # each engine's own options, as it declares them (once, when engines share one)
        for option in spec.options:
            if option.name not in added:
                _add_option(add, option)
                added.add(option.name)
    add("--model", type=_model, default=DEFAULTS.model, metavar="{" + ",".join(MODELS) + "} or FILE.py:FUNCTION",
        help="what each replica runs (default linear, the tutorial's), or your own: FILE.py:FUNCTION or "
        "package.module:FUNCTION, a function that returns an nn.Module (docs/cli.md, Your own model)")
    add("--example", metavar="FILE.py:FUNCTION",
        help="with --model FILE.py:FUNCTION, a function that returns one batch of inputs: a tensor, a tuple, list, "
        "dict, namedtuple or dataclass of them (model(batch)), or dpviz.Args(*args, **kwargs). Its rows set the "
        "batch size unless --batch-size is given; default: --batch-size rows of --input-size random features")
    add("--loss", metavar="FILE.py:FUNCTION",
        help="with your own --model and --train, loss(output, batch) -> a 0-dim tensor; default: the mean of the "
        "output (every floating-point tensor in it, summed)")
    add("--debug", action="store_true", help="print the traceback of an error in your own model, batch or loss")
    add("--inputs", type=_setting("inputs"), choices=INPUTS, default=DEFAULTS.inputs,
        help="how each batch is passed to the model (default tensor: model(x))")
    add("--preset", type=_preset, metavar="NAME",
        help="start from a pitfall preset's settings (listed below); other options given override it (each runs "
        "on its own engine: the ddp- presets DistributedDataParallel, zero1- ZeRO-1, fsdp- FSDP, the others "
        "DataParallel)")
    add("--trace", type=Path, metavar="FILE", help="write the trace as JSON (open it in the app)")
    add("--chrome-trace", type=Path, metavar="FILE",
        help="write a Chrome Trace Event file for Perfetto / chrome://tracing (under DDP: one process per rank, "
        "its bucket all-reduces on a track beside its compute)")
    return parser


def _add_option(add: Callable[..., object], option: Option) -> None:
    """An engine's option as a flag: a toggle that is on unless given (--no-set-epoch) or off unless given
    (--join), or a value with its limits."""
    engines = " or ".join(f"--engine {e.name}" for e in owners(option.name))
    words = f"{engines} only: {option.help[:1].lower()}{option.help[1:].rstrip('.')}"
    if option.kind == "flag":
        add(_flag(option.name), dest=option.name, action="store_false" if option.unset else "store_true", help=words)
    elif option.kind == "mib":
        add(_flag(option.name), type=_setting(option.name), default=option.unset, metavar="MIB",
            help=f"{words} ({_float_limits(option.name)} MiB, or none for the default)")
    elif option.kind == "choice":
        add(_flag(option.name), type=_setting(option.name), choices=CHOICES[option.name], default=option.unset,
            help=f"{words} (default {option.unset})")
    else:
        add(_flag(option.name), type=_setting(option.name), default=option.unset, metavar="N",
            help=f"{words} ({_limits(option.name, option.unset)})")


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    """Run the command line; returns the exit status. SIGTERM, SIGINT and SIGHUP end the run (its processes,
    its half-written files) and return 128 + the signal's number, after one line saying so."""
    written: list[Path] = []
    with stop_on_signals():
        try:
            return _main(argv, written, prog)
        except Stopped as stop:
            return stopped(stop, written)


def stopped(stop: Stopped, written: Sequence[Path] = ()) -> int:
    """The one line a stopped run prints, and its exit status."""
    files = (f"{' and '.join(_shown(path) for path in written)} had been written whole, nothing else was written"
             if written else "no file was written or changed")
    print(f"dpviz: stopped by {stop.words}; every process the run started has ended, and {files}.", file=sys.stderr)
    return stop.exit_status


def _main(argv: Sequence[str] | None, written: list[Path], prog: str) -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    own_model = args.model if ":" in args.model else None  # a module of the user's own, built below
    if own_model is None and (args.example or args.loss):
        parser.error(f"{'--example' if args.example else '--loss'} needs --model FILE.py:FUNCTION, a model of your own.")
    for path in (args.trace, args.chrome_trace):
        problem = _unwritable(path) if path is not None else None
        if problem:
            parser.error(f"cannot write {_shown(path)}: {problem}.")
    values = dict(
        input_size=args.input_size, output_size=args.output_size, batch_size=args.batch_size,
        data_size=args.data_size, gpus=args.gpus, shuffle=not args.no_shuffle, seed=args.seed, backend=args.backend,
        train=args.train, model=args.model, inputs=args.inputs, engine=args.engine,
        **{name: getattr(args, name) for name in ENGINE_OPTIONS},
    )
    if args.preset:  # the preset's settings, except where an option was given on the command line
        preset = ALL_PRESETS[args.preset]
        values = {**values, **{k: v for k, v in preset.config.to_dict().items() if not _given(argv, k)}}
        own = ENGINES[preset.config.engine]
        if values["engine"] != own.name:
            others = list(presets_of(values["engine"]))
            parser.error(f"--preset {args.preset} shows a {own.label} pitfall, so it runs with engine {own.name}, "
                         f"not {values['engine']}; {ENGINES[values['engine']].label}'s are {', '.join(others)}.")
    if own_model is not None:  # until the module is built: the settings are checked first, as for any module of one's
        values.update(model=OWN, inputs=OWN)  # own (its batch's form and its layers are the engine's to check once it is)
    engine = ENGINES[values["engine"]]
    for name in ENGINE_OPTIONS:
        if name not in engine.unset and _given(argv, name):
            parser.error(f"{needs(name, _flag(name))}, got engine {values['engine']!r}.")
    ranked = under_torchrun()
    try:
        config = RunConfig(**values)
        if ranked:  # this process is one rank of torchrun's world; the world says how many
            if not ENGINES[config.engine].processes:
                ranked_engines = " or ".join(f"--engine {name}" for name, spec in ENGINES.items() if spec.processes)
                raise ConfigError(f"torchrun started this process as one of {_torchrun.world_size()} ranks, but "
                                  f"{ENGINES[config.engine].label} runs in one process; use {ranked_engines}, or run "
                                  "without torchrun.")
            config = _torchrun.resolve(_torchrun.check_world(config, _given(argv, "gpus")))
        else:
            resolve(config)  # a device kind this machine lacks is a bad option too, said before the run
    except ConfigError as error:
        parser.error(str(error))
    workload = None
    if own_model is not None:
        workload = _own_workload(parser, args, argv, own_model, config)
        config = workload.config
    writes = not ranked or _torchrun.global_rank() == 0  # under torchrun, rank 0 alone prints and writes
    if workload is not None and writes:
        print(f"dpviz: your model {workload.described()}; {plural(config.num_batches, ENGINES[config.engine].unit)} of "
              f"{config.batch_size:,} rows drawn from your batch's {workload.rows:,}.", file=sys.stderr)
    # Each output file is tried before the run, so a place that takes no file is one line before any log;
    # a file that is there already is left whole until a complete new one replaces it.
    outputs = {path: dump for path, dump in ((args.trace, trace_json.dumps), (args.chrome_trace, chrome_trace.dumps))
               if path is not None and writes}
    for path in outputs:
        problem = _cannot_create(path)
        if problem:
            parser.error(f"cannot write {_shown(path)}: {problem}.")
    if ranked:
        try:
            trace = _torchrun.record_rank(config, workload=workload)
        except Exception as error:  # the process group could not form, or broke before the gather
            print(f"dpviz: rank {_torchrun.global_rank()} of {config.gpus} under torchrun failed: "
                  f"{one_line(f'{type(error).__name__}: {error}')}", file=sys.stderr)
            return 1
        if trace is None:  # not rank 0: its report went to rank 0, which writes the trace
            return 0
    else:
        trace = record(config, workload=workload)
    sys.stdout.write(tutorial_log(trace))
    sys.stdout.flush()
    for path, dump in outputs.items():
        atomic_write(path, dump(trace))
        written.append(path)
    return trace.spec.part("outcome")(trace, config, ranked)


def _model(text: str) -> str:
    """--model's value: one of the catalogue's models, or FILE.py:FUNCTION / package.module:FUNCTION."""
    if ":" in text:
        return text
    name = _setting("model")(text)
    if name not in MODELS:
        raise argparse.ArgumentTypeError(f"model must be one of {', '.join(MODELS)}, or your own as FILE.py:FUNCTION "
                                         f"or package.module:FUNCTION, got {text!r}.")
    return name


def _own_workload(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: Sequence[str] | None, own: str,
                  config: RunConfig):
    """The user's module, batch and loss, built and checked before the run; one line and status 2 if they
    cannot run (the traceback too with --debug)."""
    from dpviz.engines.workload.own import OwnModelError, from_specs

    try:
        return from_specs(own, args.example, args.loss, config, batch_size_given=_given(argv, "batch_size"),
                          data_size_given=_given(argv, "data_size"))
    except OwnModelError as error:
        if args.debug:
            import traceback

            traceback.print_exception(error.__cause__ or error, file=sys.stderr)
        # Not parser.error: its cut of long argparse values would cut a quoted error of the user's own.
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(error).strip().splitlines()[0])
        parser.exit(2, f"{parser.prog}: {text}\n")


def _flag(name: str) -> str:
    """The flag of setting `name`: --no-NAME for a toggle that is on unless given (shuffle, set_epoch)."""
    on = name == "shuffle" or ENGINE_OPTIONS.get(name) is True
    return ("--no-" if on else "--") + name.replace("_", "-")


def _float_limits(name: str) -> str:
    low, high = FLOAT_LIMITS[name]
    return f"{low:g} to {high:g}"


def _unwritable(path: Path) -> str | None:
    """Why `path` cannot take an output file, checked before the run; None when it can."""
    try:
        if not path.parent.is_dir():
            return f"folder {_shown(path.parent)} does not exist"
        if path.is_dir():
            return "it is a folder; give a file name"
    except OSError as error:  # a name longer than the file system allows (255 bytes a part on Linux)
        return (error.strerror or str(error)).lower()
    except ValueError:  # a NUL byte, which no file name may hold
        return "a file name cannot hold a NUL byte"
    return None


def _cannot_create(path: Path) -> str | None:
    """Why no file can be created beside `path` (where its complete version will be renamed to); None if one can."""
    probe = _temporary(path)
    try:
        probe.open("x").close()
    except OSError as error:
        return (error.strerror or str(error)).lower()
    except ValueError:  # a NUL byte, which no file name may hold
        return "a file name cannot hold a NUL byte"
    probe.unlink(missing_ok=True)
    return None


def atomic_write(path: Path, text: str) -> None:
    """Write `text` to `path` whole or not at all: to a temporary name beside it, then renamed over it. A run
    stopped while writing leaves the file that was there before (or none), never half a trace."""
    temporary = _temporary(path)
    try:
        with temporary.open("x") as file:  # "x": a new file, with the permissions open() gives any file
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _temporary(path: Path) -> Path:
    """A hidden name beside `path` that no other file has: `.run.json.1f3a9c2e.tmp`."""
    return path.with_name(f".{path.name[:40]}.{secrets.token_hex(4)}.tmp")


def _shown(path: Path, limit: int = 80) -> str:
    """A path as the one-line message shows it: control characters escaped, a very long one cut in the middle."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(path))
    return text if len(text) <= limit else f"{text[:limit // 2]}…{text[-(limit // 2):]}"


def _given(argv: Sequence[str] | None, name: str) -> bool:
    """Whether the option for setting `name` was on the command line (--no-shuffle for shuffle)."""
    flag = _flag(name)
    return any(a == flag or a.startswith(flag + "=") for a in (sys.argv[1:] if argv is None else argv))
