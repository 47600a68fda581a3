"""Command line: run the DataParallel tutorial, print its log, write the trace files.

    python -m dpviz --batch-size 30 --data-size 100 --gpus 8 --trace run.json --chrome-trace run.perfetto.json
    python -m dpviz --model gru_dim1 --inputs hidden --gpus 3
    python -m dpviz --preset kwargs-small-batch

A bad value prints one line on stderr and exits with status 2. A run that DataParallel itself fails
(a pitfall) prints the log up to the error, writes the trace files, and exits with status 1.
"""
from __future__ import annotations

import argparse
import contextlib
import re
import sys
from pathlib import Path
from typing import Callable, NoReturn, Sequence

from . import chrome_trace, trace_json
from .catalogue import INPUT_SPECS, MODEL_SPECS
from .config import (
    BACKENDS, ENGINES, INPUTS, LIMITS, MAX_BATCHES, MAX_DATASET_ELEMENTS, MAX_TRAIN_BATCHES, MODELS, ConfigError, RunConfig,
    parse_setting,
)
from .presets import PRESETS
from .engines import ENGINES as ENGINE_NAMES
from .engines.run import record, resolve
from .tutorial_log import tutorial_log

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


def _setting(name: str) -> Callable[[str], object]:
    def parse(text: str) -> object:
        try:
            return parse_setting(name, text)
        except ConfigError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    parse.__name__ = name  # argparse names the type in its messages
    return parse


def _limits(name: str) -> str:
    low, high = LIMITS[name]
    return f"{low:,} to {high:,}; default {getattr(DEFAULTS, name)}"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m dpviz",
        allow_abbrev=False,  # --gpu must not pass for --gpus: a preset is overridden only by options named in full
        description="Run PyTorch's DataParallel tutorial (nn.Linear under nn.DataParallel on random data), print the "
        "sizes each replica saw as the tutorial does, and record the run as a trace. Without enough GPUs the "
        "devices are simulated by CPU threads that follow DataParallel's rules exactly.",
        epilog=f"Limits: at most {MAX_BATCHES:,} batches per run ({MAX_TRAIN_BATCHES:,} with --train) and "
        f"data_size x (numbers per row) at most {MAX_DATASET_ELEMENTS:,}. Models: "
        + "; ".join(f"{m}: {MODEL_SPECS[m].label}" for m in MODELS) + ". Inputs: "
        + "; ".join(f"{f}: {INPUT_SPECS[f].label}" for f in INPUTS) + ". Presets: " + ", ".join(PRESETS)
        + ". Exit status 2 means a bad option, 1 that DataParallel raised during the run.",
    )
    add = parser.add_argument
    add("--batch-size", type=_setting("batch_size"), default=DEFAULTS.batch_size, help=f"rows per batch ({_limits('batch_size')})")
    add("--data-size", type=_setting("data_size"), default=DEFAULTS.data_size, help=f"rows in the random dataset ({_limits('data_size')})")
    add("--gpus", type=_setting("gpus"), default=DEFAULTS.gpus, help=f"devices to spread each batch over ({_limits('gpus')})")
    add("--input-size", type=_setting("input_size"), default=DEFAULTS.input_size, help=f"features per row ({_limits('input_size')})")
    add("--output-size", type=_setting("output_size"), default=DEFAULTS.output_size, help=f"outputs per row ({_limits('output_size')})")
    add("--seed", type=_setting("seed"), default=DEFAULTS.seed, help=f"seed for data, weights and order ({_limits('seed')})")
    add("--no-shuffle", action="store_true", help="keep the dataset order (the tutorial shuffles)")
    add("--train", action="store_true",
        help="after each forward, an MSE loss on the output device, backward through DataParallel and an SGD step "
        "(the tutorial runs forward only)")
    add("--backend", type=_setting("backend"), choices=BACKENDS, default=DEFAULTS.backend,
        help="cuda: the real nn.DataParallel; simulated: CPU stand-ins; auto (default): cuda when the machine has at least --gpus GPUs and --gpus >= 2")
    add("--engine", type=_setting("engine"), choices=ENGINES, default=DEFAULTS.engine,
        help="what spreads the batch over the devices: " + "; ".join(f"{name}, {what}" for name, what in ENGINE_NAMES.items()))
    add("--model", type=_setting("model"), choices=MODELS, default=DEFAULTS.model,
        help="what each replica runs (default linear, the tutorial's)")
    add("--inputs", type=_setting("inputs"), choices=INPUTS, default=DEFAULTS.inputs,
        help="how each batch is passed to the model (default tensor: model(x))")
    add("--preset", choices=list(PRESETS),
        help="start from a pitfall preset's settings; other options given override it")
    add("--trace", type=Path, metavar="FILE", help="write the trace as JSON (open it in the app)")
    add("--chrome-trace", type=Path, metavar="FILE", help="write a Chrome Trace Event file for Perfetto / chrome://tracing")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for path in (args.trace, args.chrome_trace):
        problem = _unwritable(path) if path is not None else None
        if problem:
            parser.error(f"cannot write {_shown(path)}: {problem}.")
    values = dict(
        input_size=args.input_size, output_size=args.output_size, batch_size=args.batch_size,
        data_size=args.data_size, gpus=args.gpus, shuffle=not args.no_shuffle, seed=args.seed, backend=args.backend,
        train=args.train, model=args.model, inputs=args.inputs, engine=args.engine,
    )
    if args.preset:  # the preset's settings, except where an option was given on the command line
        given = {name for name in values if _given(argv, name)}
        values = {**values, **{k: v for k, v in PRESETS[args.preset].config.to_dict().items() if k not in given}}
    try:
        config = RunConfig(**values)
        resolve(config)  # a device kind this machine lacks is a bad option too, said before the run
    except ConfigError as error:
        parser.error(str(error))
    # The output files are opened before the run, so a place that takes no file is one line before any log.
    files = {}
    for path in (args.trace, args.chrome_trace):
        if path is not None:
            try:
                files[path] = path.open("w")
            except OSError as error:
                parser.error(f"cannot write {_shown(path)}: {error.strerror or error}.")
            except ValueError:  # a NUL byte: no file name may hold one
                parser.error(f"cannot write {_shown(path)}: a file name cannot hold a NUL byte.")
    with contextlib.ExitStack() as stack:
        for file in files.values():
            stack.enter_context(file)
        trace = record(config)
        sys.stdout.write(tutorial_log(trace))
        for path, dump in ((args.trace, trace_json.dumps), (args.chrome_trace, chrome_trace.dumps)):
            if path is not None:
                files[path].write(dump(trace))
    kind = "real GPUs" if trace.backend == "cuda" else "simulated devices"
    batches = len(trace.batches)
    if trace.failure is not None:
        print(f"dpviz: DataParallel failed in batch {trace.failure.batch} of {config.num_batches} on {config.gpus} {kind}: "
              f"{trace.failure.headline}", file=sys.stderr)
        return 1
    kind = kind if config.gpus > 1 else kind[:-1]  # "1 simulated device", "1 real GPU"
    print(f"dpviz: {batches} batch{'es' if batches != 1 else ''} on {config.gpus} {kind} in {trace.duration:.3f} s.", file=sys.stderr)
    return 0


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


def _shown(path: Path, limit: int = 80) -> str:
    """A path as the one-line message shows it: control characters escaped, a very long one cut in the middle."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(path))
    return text if len(text) <= limit else f"{text[:limit // 2]}…{text[-(limit // 2):]}"


def _given(argv: Sequence[str] | None, name: str) -> bool:
    """Whether the option for setting `name` was on the command line (--no-shuffle for shuffle)."""
    flag = "--no-shuffle" if name == "shuffle" else "--" + name.replace("_", "-")
    return any(a == flag or a.startswith(flag + "=") for a in (sys.argv[1:] if argv is None else argv))
