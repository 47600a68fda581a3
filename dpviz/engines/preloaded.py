"""Imported last by the forkserver that starts DDP's ranks, after torch: readies it to fork ranks cheaply.

Every rank is a fork of the forkserver and shares its memory until it writes to a page.

- Python's garbage collector writes to every object it examines, so a rank's first full collection
  would copy most of torch's pages into the rank. `gc.freeze()` moves everything imported so far out
  of the collector's sight: those pages stay shared between the ranks.
- multiprocessing runs the parent's main script again in every child it starts (as "__mp_main__"), so
  that functions defined there can be found. A rank runs dpviz's own module-level function and needs
  nothing from the main script, which on a hosted page is Streamlit's page: importing it again cost
  each rank about 70 MB and the time of importing Streamlit, pandas and plotly. This forkserver, which
  starts nothing but ranks, skips that step for its children.
- The forkserver writes to the terminal of whoever started it. A rank's output goes to a log of its own
  once its code runs (launch.py); before that, a rank whose launcher was stopped while starting it fails
  to unpickle what the launcher sent (its queue's semaphore is gone) and multiprocessing prints that
  traceback. Neither the forkserver nor a rank has anything to say to the user: the launcher reports a
  rank that ends without a word by its exit code.
"""
import gc
import multiprocessing.spawn as spawn
import os


def _main_not_needed(main: str) -> None:
    """A rank's target is dpviz's own function: nothing of the main script is needed."""


spawn._fixup_main_from_path = _main_not_needed
spawn._fixup_main_from_name = _main_not_needed
_quiet = os.open(os.devnull, os.O_WRONLY)
os.dup2(_quiet, 1)
os.dup2(_quiet, 2)
os.close(_quiet)
gc.freeze()
