"""`python -m dpviz`: see dpviz/cli.py."""
import os
import sys

from dpviz.stopping import Stopped, ignore_signals, stop_on_signals

if __name__ == "__main__":  # a rank process started by multiprocessing imports this too
    # Once the run is over (its files renamed into place, its last line printed), a stop changes nothing:
    # the process is ending anyway, and a handler left to Python's teardown would print a traceback.
    ignore_signals()
    with stop_on_signals():  # from the first moment: a signal while the modules load is one line too
        try:
            from dpviz.cli import main
        except Stopped as stop:
            print(f"dpviz: stopped by {stop.words} while starting; nothing was run or written.", file=sys.stderr)
            sys.exit(stop.exit_status)
    code = main()  # a signal during the run is answered inside, with what it stopped
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
