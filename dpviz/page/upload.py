"""A trace file the visitor uploads: checked once, its settings shown in the sidebar, drawn instead of a run."""
from __future__ import annotations

import streamlit as st

from dpviz.echo import LIMIT, MESSAGE_LIMIT, markdown_text
from dpviz.trace import Trace
from dpviz.trace.json_io import MAX_TRACE_BYTES, TraceError, loads
from dpviz.page.budget import BUDGET, NeverFits
from dpviz.page.opened import OWN_MODEL_HINT
from dpviz.page.session import let_go_oldest
from dpviz.page.state import ENGINE, UPLOAD

# What reading a trace file takes in the server, per byte of the file: json.loads of the largest trace a run makes
# (24.6 MB) took 153 MB (dpviz/trace/cost.py), and the Trace built from it holds about 60 MB more.
READ_BYTES_PER_BYTE = 9


def take_upload() -> None:
    """The uploader's callback: check a new file once (the same Trace object then keeps its figures
    cached), and set the controls to the settings it was recorded with, so the sidebar describes it."""
    upload = st.session_state.get(UPLOAD)
    if upload is None:
        st.session_state.upload, st.session_state.upload_error = None, None
        return
    raw = upload.getvalue()
    try:
        with BUDGET.hold(READ_BYTES_PER_BYTE * len(raw), make_room=let_go_oldest):  # read when the server has room
            st.session_state.upload, st.session_state.upload_error = loads(raw), None
    except TraceError as error:
        st.session_state.upload, st.session_state.upload_error = None, str(error)
        return
    except NeverFits:
        st.session_state.upload, st.session_state.upload_error = None, (
            f"reading it would take about {READ_BYTES_PER_BYTE * len(raw) / 10**6:,.0f} MB and this server has "
            f"{BUDGET.room_alone() / 10**6:,.0f} MB for such work.")
        return
    config = st.session_state.upload.config
    for name, value in config.to_dict().items():
        st.session_state[name] = value  # a loaded trace's settings passed the same checks as the widgets'
    st.session_state[ENGINE] = config.engine


def showing_upload() -> bool:
    """Whether the page shows an uploaded trace (set by the uploader's callback, before this run)."""
    return st.session_state.get(UPLOAD) is not None and st.session_state.get("upload") is not None


def uploaded_trace() -> Trace | None:
    """A trace file the visitor uploaded, checked; None (with a sentence shown) if there is none or it is bad."""
    upload = st.sidebar.file_uploader(
        "Explore a recorded trace (JSON)", type=["json"], max_upload_size=MAX_TRACE_BYTES // 2**20, key=UPLOAD,
        on_change=take_upload,
        help="For example one written by `python -m dpviz --trace run.json` on a multi-GPU machine. The settings "
        "above change to the ones it was recorded with.",
    )
    st.sidebar.caption(OWN_MODEL_HINT)
    if upload is None:
        return None
    if st.session_state.get("upload_error"):
        # The file's name and the loader's sentence (which quotes the file) are the visitor's text.
        st.warning(f"{markdown_text(upload.name, LIMIT)} could not be used: "
                   f"{markdown_text(st.session_state.upload_error, MESSAGE_LIMIT)} Showing the live run instead.")
    return st.session_state.get("upload")
