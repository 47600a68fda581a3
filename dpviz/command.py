"""The `dpviz` command and `python -m dpviz`: one entry for a run of any engine, `plan` and `page`.

    dpviz --engine ddp --gpus 4 --train --trace run.json    # a run: dpviz/cli.py
    dpviz plan --model transformer --size 7b --gpus 8        # a plan at real size, runs nothing: dpviz/cli_plan.py
    dpviz page --trace run.json                              # the page: dpviz/cli_page.py

Only light modules are imported here: a signal while torch loads must already be answered in one line.
"""
from __future__ import annotations

import os
import sys
from importlib import import_module
from typing import NoReturn

from dpviz.commands import COMMANDS
from dpviz.stopping import Stopped, ignore_signals, stop_on_signals



def main(prog: str = "dpviz") -> NoReturn:
    """Run the command named by sys.argv and exit with its status."""
    if os.getcwd() not in sys.path:
        # `python -m dpviz` puts the working folder first on sys.path, a console script puts its own folder there:
        # `--model mypackage.models:build` must find the user's package from their folder under both.
        sys.path.insert(0, os.getcwd())
    arguments = sys.argv[1:]
    if arguments[:1] and arguments[0] in COMMANDS:
        sys.exit(_command(arguments[0], arguments[1:], f"{prog} {arguments[0]}"))
    # Once the run is over (its files renamed into place, its last line printed), a stop changes nothing:
    # the process is ending anyway, and a handler left to Python's teardown would print a traceback.
    ignore_signals()
    with stop_on_signals():  # from the first moment: a signal while the modules load is one line too
        try:
            from dpviz.cli import main as run
        except Stopped as stop:
            print(f"dpviz: stopped by {stop.words} while starting; nothing was run or written.", file=sys.stderr)
            sys.exit(stop.exit_status)
    code = run(prog=prog)  # a signal during the run is answered inside, with what it stopped
    from dpviz.engines.ranks.torchrun import under_torchrun

    if under_torchrun():
        # A rank under torchrun ends here, its files written and its streams flushed, without the interpreter's
        # teardown: there gloo's threads, still joinable when C++'s static objects are destroyed, sometimes
        # aborted the process (SIGABRT, "terminate called without an active exception") after a run that had
        # succeeded, and torchrun then reported the node as failed and its peer's agent waited for it.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code or 0)
    sys.exit(code)


def _command(name: str, arguments: list[str], prog: str) -> int:
    run = import_module(COMMANDS[name][0]).main
    if name == "page":  # Streamlit's server answers signals itself
        return run(arguments, prog=prog)
    try:
        with stop_on_signals():
            return run(arguments, prog=prog)
    except Stopped as stop:
        print(f"dpviz: stopped by {stop.words}.", file=sys.stderr)
        return stop.exit_status
