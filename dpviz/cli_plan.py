"""`python -m dpviz plan`: a model's memory per device under every engine, from its shapes, as a table and JSON.

    python -m dpviz plan --model transformer --size 7b --gpus 8 --optimizer adam --precision mixed --json plan.json
    python -m dpviz plan --model my_model.py:build --example my_model.py:make_batch --gpus 4
    python -m dpviz plan --model transformer --size 7b --gpus 8 --schedule 1f1b --microbatches 8
    python -m dpviz plan --model transformer --size 7b --gpus 8 --tp 4 --optimizer adam   # FSDP 2 x TP 4

Nothing runs on a device: the model is measured on the meta device (dpviz.engines.plan). A bad value is one line
on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import NoReturn, Sequence

from dpviz.cli_json import write_json

from dpviz.analysis.model_state import lines as model_state_lines
from dpviz.analysis.plan_sends import collective_lines
from dpviz.analysis.wording import human_bytes

KINDS = ("parameters", "gradients", "optimizer state", "activations", "sent")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message}\n")


PROG = "python -m dpviz plan"  # how messages name the command; the installed `dpviz plan` names itself


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    from dpviz.cli_types import setting as _setting
    from dpviz.engines.plan import DTYPES, PRECISIONS, plan_options, plan_settings, real_sizes

    parser = _Parser(prog=prog, description=(
        "Plan a model's memory per device under every engine from its shapes (measured on the meta device): "
        "parameters, gradients, optimizer state and activations of the example batch, and the bytes each device "
        "sends per step."))
    parser.add_argument("--model", required=True,
                        help="a catalogue model (transformer, mlp, ...) or your own as FILE.py:FUNCTION (it builds the module)")
    parser.add_argument("--example", help="FILE.py:FUNCTION that makes your model's example batch (needed with your own model)")
    parser.add_argument("--size", choices=real_sizes(),
                        help="a catalogue model at a real size it declares (the transformer's)")
    parser.add_argument("--input-size", type=int, default=5, help="features per row of a catalogue model (default 5)")
    parser.add_argument("--rows", type=int, default=8, help="rows of a catalogue model's example batch (default 8)")
    parser.add_argument("--gpus", type=int, required=True, help="devices (ranks) to plan for, 1 to 1,024")
    parser.add_argument("--optimizer", default="sgd", help="sgd (with momentum) or adam (default sgd)")
    parser.add_argument("--dtype", choices=list(DTYPES),
                        help="the parameters' dtype, and so their gradients' and the optimizer's state (default: the "
                             "model's own)")
    parser.add_argument("--precision", choices=list(PRECISIONS), default="full",
                        help="full: compute in the parameters' dtype (default); mixed: compute in bfloat16 over float32 "
                             "parameters, gradients and optimizer state (torch.autocast; FSDP2's MixedPrecisionPolicy)")
    for option in plan_options().values():  # an engine's own, as its runs take them (a pipeline's schedule), or its
        # plan's alone (a tensor-parallel degree: a whole number, held to its limits by the plan, in one sentence)
        kind = _whole(option.name) if option.name in plan_settings() else _setting(option.name)
        parser.add_argument(f"--{option.name.replace('_', '-')}", type=kind, default=option.unset,
                            choices=option.choices or None, metavar=None if option.choices else "N",
                            help=f"{option.help} (default {option.unset})")
    parser.add_argument("--json", type=Path, help="write the plan as JSON to this file")
    return parser


def _whole(name: str):
    def parse(text: str) -> int:
        try:
            return int(text.strip().replace("_", ""), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a whole number, got {text[:40]!r}.") from None

    parse.__name__ = name
    return parse


def main(argv: Sequence[str], prog: str = PROG) -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    from dpviz.engines.plan import plan, plan_options

    try:
        model, example = _model(args)
        found = plan(model, example, gpus=args.gpus, optimizer=args.optimizer, dtype=args.dtype, size=args.size,
                     rows=args.rows, input_size=args.input_size, precision=args.precision,
                     **{name: getattr(args, name) for name in plan_options()})
    except (ValueError, TypeError) as error:
        parser.exit(2, f"{parser.prog}: {_one_line(error)}\n")
    print(table(found))
    write_json(parser, args.json, found)
    return 0


def _model(args: argparse.Namespace):
    """The module and example batch the flags name: a catalogue name (the plan builds it), or FILE.py:FUNCTION."""
    if ":" not in args.model:
        if args.example is not None:
            raise ValueError("--example goes with a model of your own (FILE.py:FUNCTION).")
        return args.model, None
    from dpviz.engines.workload.own import OwnModelError, load

    try:
        model = load(args.model, "model", "--model")()
        example = load(args.example, "example", "--example")() if args.example else None
    except OwnModelError as error:
        raise ValueError(str(error)) from None
    return model, example


def table(found: dict) -> str:
    """The plan as the terminal shows it: per engine, the fullest device's bytes of each kind."""
    model = found["model"]
    lines = [f"{model['class']}: {model['parameters']:,} parameters ({human_bytes(model['parameter bytes'])}, "
             f"{model['dtype']}{_computing(model)}), {found['gpus']:,} devices, {found['optimizer']}; the fullest device "
             "under each engine:"]
    width = max(len(planned["label"]) for planned in found["engines"].values())
    lines.append(f"{'':{width}}  " + "  ".join(f"{kind:>15}" for kind in KINDS))
    for planned in found["engines"].values():
        if "refused" in planned:  # an engine that cannot run the model so (a pipeline of more stages than layers):
            # the live engine's own sentence, in its row; the others' plans stand, so the command succeeds
            lines.append(f"{planned['label']:{width}}  not planned: {_one_line(ValueError(planned['refused']))}")
            continue
        most = planned["most"]
        lines.append(f"{planned['label']:{width}}  " + "  ".join(f"{human_bytes(most[kind]):>15}" for kind in KINDS))
    for planned in found["engines"].values():  # the settings of its own an engine was planned at
        if planned.get("options"):
            lines.append(f"{planned['label']}: " + ", ".join(f"{key} {value}" for key, value in planned["options"].items()))
    lines += collective_lines(found)
    return "\n".join(lines + model_state_lines(found))


def _computing(model: dict) -> str:
    return ", computing in bfloat16" if model.get("precision") == "mixed" else ""


def _one_line(error: BaseException) -> str:
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in first)[:300]
