"""`python -m dpviz compare`: the same settings under two engines, run, and compared as the page's Compare tab does:
bytes each device sends per step by what moves, memory by kind at the same moment, the modelled times, the
sentences under the chart. A table on the terminal, `--json FILE` as data.

    python -m dpviz compare --engines dp ddp --gpus 4 --train
    python -m dpviz compare --engines zero1 fsdp --gpus 4 --train --optimizer adam --json compare.json

The settings are fitted to both engines (a pipeline needs a model it can cut, training, a batch its microbatches
divide) and the change said in one line on stderr. A bad option is one line on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn, Sequence

from dpviz.cli_json import write_json

from dpviz.config import CHOICES, ConfigError, ENGINE_OPTIONS, INPUTS, MODELS, RunConfig, check_setting
from dpviz.engines import ENGINES
from dpviz.trace import Trace

PROG = "python -m dpviz compare"  # how messages name the command; the installed `dpviz compare` names itself
DEFAULTS = RunConfig()


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, no usage block: the message says it all
        self.exit(2, f"{self.prog}: {message}\n")


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    from dpviz.cli import _add_option, _limits
    from dpviz.cli_types import setting

    parser = _Parser(prog=prog, allow_abbrev=False, description=(
        "Run the same settings under two engines and compare them: what each device sends per step, by what moves "
        "(computed), what each holds by kind at the end of the same step, and the time a step took (measured) and "
        "would take on real links (modelled)."))
    add = parser.add_argument
    add("--engines", nargs=2, metavar=("A", "B"), required=True, choices=list(ENGINES),
        help="the two engines, any two of " + ", ".join(ENGINES))
    add("--batch-size", type=setting("batch_size"), default=DEFAULTS.batch_size, help=f"rows per batch ({_limits('batch_size')})")
    add("--data-size", type=setting("data_size"), default=DEFAULTS.data_size, help=f"rows of random data ({_limits('data_size')})")
    add("--gpus", type=setting("gpus"), default=DEFAULTS.gpus, help=f"devices, ranks or stages ({_limits('gpus')})")
    add("--input-size", type=setting("input_size"), default=DEFAULTS.input_size, help=f"features per row ({_limits('input_size')})")
    add("--output-size", type=setting("output_size"), default=DEFAULTS.output_size, help=f"outputs per row ({_limits('output_size')})")
    add("--seed", type=setting("seed"), default=DEFAULTS.seed, help=f"seed for data, weights and order ({_limits('seed')})")
    add("--no-shuffle", action="store_true", help="keep the dataset order (the tutorial shuffles)")
    add("--train", action="store_true", help="loss, backward and an optimizer step after each forward")
    add("--backend", type=setting("backend"), choices=CHOICES.get("backend", ("auto", "cuda", "simulated", "cpu")),
        default=DEFAULTS.backend, help="cuda, simulated or auto (default), as for a run")
    add("--model", type=setting("model"), choices=MODELS, default=DEFAULTS.model, help="a catalogue model (default linear)")
    add("--inputs", type=setting("inputs"), choices=INPUTS, default=DEFAULTS.inputs, help="how each batch is passed")
    added = set()
    for spec in ENGINES.values():  # each engine's own options: the second engine's run reads its own
        for option in spec.options:
            if option.name not in added:
                _add_option(add, option)
                added.add(option.name)
    add("--json", type=Path, metavar="FILE", help="write the comparison as JSON to this file")
    return parser


def main(argv: Sequence[str], prog: str = PROG) -> int:
    from dpviz.cli import _flag, _given
    from dpviz.engines.run import record, resolve
    from dpviz.page.link import fit_pair

    parser = build_parser(prog)
    args = parser.parse_args(argv)
    first, second = args.engines
    if first == second:
        parser.error(f"--engines names {first} twice; compare two different engines.")
    for name in ENGINE_OPTIONS:  # an option of an engine that is not compared says which engines read it
        if name not in ENGINES[first].unset and name not in ENGINES[second].unset and _given(argv, name):
            parser.error(f"{_flag(name)} is not an option of {ENGINES[first].label} or {ENGINES[second].label}.")
    values = dict(input_size=args.input_size, output_size=args.output_size, batch_size=args.batch_size,
                  data_size=args.data_size, gpus=args.gpus, shuffle=not args.no_shuffle, seed=args.seed,
                  backend=args.backend, train=args.train, model=args.model, inputs=args.inputs, engine=second,
                  **{name: getattr(args, name) if name in ENGINES[second].unset else unset
                     for name, unset in ENGINE_OPTIONS.items()})
    try:  # each value within its limits; settings that do not go together are fitted to both engines below
        for name, value in values.items():
            check_setting(name, value)
    except ConfigError as error:
        parser.error(str(error))
    (one, other), changed = fit_pair(values, (first, second))
    try:
        for each in (one, other):
            resolve(each)
    except ConfigError as error:
        parser.error(str(error))
    if changed:
        print(f"dpviz: {changed}", file=sys.stderr)
    traces = (record(one), record(other))
    found = comparison_data(*traces, changed)
    print(table(found))
    write_json(parser, args.json, found)
    return 0


def comparison_data(a: Trace, b: Trace, changed: str | None = None) -> dict:
    """The comparison as plain data: per engine and device, bytes sent per step by what moves, memory by kind at the
    same moment, and the sentences the page writes under its chart."""
    from dpviz.analysis.compare import comparison, modelled_times, ratio_headline
    from dpviz.analysis.memory_compare import memory_by_kind
    from dpviz.analysis.traffic import sent_by_kind, sent_per_step

    engines = []
    for trace, modelled in zip((a, b), modelled_times(a, b) or [None, None]):
        memory = {m.lane: m for m in memory_by_kind(trace)}
        by_kind = sent_by_kind(trace)
        devices = []
        for index, (lane, sent) in enumerate(zip(trace.lanes, sent_per_step(trace))):
            name = trace.vocabulary.lane_name(lane.id)
            held = memory.get(name)
            devices.append({
                "device": name, "sent per step": sent,
                "sent by what": {f"{what} ({kind}{', backward' if backward else ''})": column[index]
                                 for (kind, what, backward), column in by_kind.items() if column[index]},
                "memory": held.kinds if held else {}, "memory at": held.moment if held else None})
        engines.append({"engine": trace.engine, "label": trace.spec.label, "devices": devices,
                        "memory kind": trace.memory_kind, "modelled": modelled})
    return {"settings": {k: v for k, v in b.config.to_dict().items() if k != "engine"}, "changed": changed,
            "headline": ratio_headline(a, b), "engines": engines, "sentences": comparison(a, b)}


def table(found: dict) -> str:
    """The comparison as the terminal shows it: one row per device, then the sentences."""
    from dpviz.analysis.memory_compare import FAMILIES
    from dpviz.analysis.wording import human_bytes

    columns = ("sent per step", *FAMILIES)
    width = max(len(f"{e['label']} {d['device']}") for e in found["engines"] for d in e["devices"])
    lines = [found["headline"] + ".", f"{'':{width}}  " + "  ".join(f"{c:>21}" for c in columns)]
    for engine in found["engines"]:
        for device in engine["devices"]:
            cells = [human_bytes(device["sent per step"])] + [human_bytes(device["memory"].get(k, 0)) for k in FAMILIES]
            lines.append(f"{engine['label'] + ' ' + device['device']:{width}}  " + "  ".join(f"{c:>21}" for c in cells))
    lines.append("Memory: every device at " + next((d["memory at"] for e in found["engines"] for d in e["devices"]
                                                     if d["memory at"]), "no moment sampled") + ".")
    return "\n".join(lines + [""] + found["sentences"])
