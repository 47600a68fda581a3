"""A trace file named when the page was started: `dpviz page --trace run.json` (`streamlit run app.py -- --trace
run.json` in the checkout).

The page reads the file as it reads an upload (JSON only, checked, never executed); it never imports or runs
code a visitor names. Recording your own model is done on your machine by the command line, whose --trace file
this opens.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import streamlit as st

from dpviz.echo import LIMIT, MESSAGE_LIMIT, markdown_text
from dpviz.trace import Trace
from dpviz.trace.json_io import MAX_TRACE_BYTES, TraceError, loads

OWN_MODEL_HINT = ("Your own model: record it on your machine with `python -m dpviz --model my_model.py:build "
                  "--trace run.json` (any engine), then upload run.json here or start the page with "
                  "`dpviz page --trace run.json`.")


def named_path(argv: list[str] | None = None) -> str | None:
    """The file after --trace on the page's own command line (after streamlit's `--`), if any."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--trace")
    known, _ = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    return known.trace


@st.cache_resource(show_spinner=False)
def _load(path: str, stamp: float) -> Trace | str:
    """The trace at `path`, or the sentence saying why it cannot be shown (cached per file version)."""
    try:
        file = Path(path)
        if file.stat().st_size > MAX_TRACE_BYTES:
            return f"it is larger than {MAX_TRACE_BYTES // 2**20} MiB."
        return loads(file.read_bytes())
    except FileNotFoundError:
        return "there is no such file."
    except IsADirectoryError:
        return "it is a folder, not a trace file."
    except OSError as error:
        return f"it could not be read ({(error.strerror or str(error)).lower()})."
    except TraceError as error:
        return str(error)


def opened_trace() -> Trace | None:
    """The trace the page was started with, checked; None (with one sentence on the page) if it is bad."""
    path = named_path()
    if not path:
        return None
    try:
        stamp = Path(path).stat().st_mtime
    except OSError:
        stamp = 0.0
    loaded = _load(path, stamp)
    if isinstance(loaded, str):
        st.warning(f"The trace {markdown_text(path, LIMIT)} named with --trace could not be opened: "
                   f"{markdown_text(loaded, MESSAGE_LIMIT)} Showing the live run instead.")
        return None
    return loaded
