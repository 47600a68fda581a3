"""The page from top to bottom: the heading, the sidebar, then an uploaded trace, one engine's run, two engines'
runs of the same settings side by side, or every engine's memory."""
from __future__ import annotations

import streamlit as st

from dpviz.echo import markdown_text
from dpviz.engines.apart import warm
from dpviz.engines import ENGINES
from dpviz.page import room
from dpviz.page.session import drawing
from dpviz.page.link import COMPARE, MEMORY, fit_pair, to_query
from dpviz.page.memory import TITLE as MEMORY_TITLE, show_memory
from dpviz.page.running import left_queue, run
from dpviz.page.sidebar import apply_link_once, controls, pitfall_buttons
from dpviz.page.state import ENGINE, PRESENT, pair, say
from dpviz.page.tabs import show, show_pair
from dpviz.page.opened import opened_trace
from dpviz.page.upload import uploaded_trace

ABOUT = ("PyTorch's DataParallel tutorial, live: nn.Linear (or another model) wrapped in nn.DataParallel, or run by "
         "DistributedDataParallel on real processes, random data, and every row followed from the DataLoader to a device "
         "and back. Settings and pitfalls in the sidebar.")
# A projector's 1024 × 768 must show a chart on the first screen: the page's heading in the toolbar's row
# (Streamlit leaves 6rem above it; its bar is made see-through, its menu still answers clicks), narrower margins beside the page than Streamlit's 5rem, a heading of one
# line. Words are never split with a hyphen ("DistributedDat-aParallel"): they wrap whole.
COMPACT = """
.stMainBlockContainer { padding: 0.6rem 1.5rem 4rem 1.5rem; }
[data-testid=stHeader] { background: transparent; pointer-events: none; }
[data-testid=stHeader] * { pointer-events: auto; }
.stMainBlockContainer h2 { font-size: 1.6rem; padding: 0 3rem 0.25rem 0; }
.stMainBlockContainer * { hyphens: manual; }
.stMainBlockContainer [data-testid=stAlertContainer] { padding: 0.6rem 1rem; }
"""
TITLES = {**{name: spec.title for name, spec in ENGINES.items()}, MEMORY: MEMORY_TITLE}


def title(choice: str) -> str:
    """The page's heading: an engine's own, every engine's memory, or the two engines compared, by name."""
    if choice == COMPARE:
        first, second = pair()
        return f"{ENGINES[first].label} and {ENGINES[second].label}, side by side"
    return TITLES[choice]


def main() -> None:
    st.set_page_config(page_title="dpviz: DataParallel, visualised", layout="wide")
    warm()  # once per server (app.py asks first, before the page's modules load): the runs' forkserver starts
    apply_link_once()
    st.html(f"<style>{COMPACT}</style>")
    heading = title(st.session_state.get(ENGINE, next(iter(ENGINES))))
    st.header(heading, anchor=False, help=ABOUT)
    room.start(heading)  # what the page puts above a chart is counted from here, for Presenting's first screen
    config, choice = controls()
    pitfall_buttons(choice)
    if config == st.session_state.link_config:
        for warning in st.session_state.link_warnings:
            say(warning)
    st.query_params.from_dict(to_query(config, page=choice, pair=pair(), presenting=bool(st.session_state.get(PRESENT))))
    trace = uploaded_trace() or opened_trace()
    if trace is not None:
        st.caption(f"Showing an uploaded trace, recorded with torch {markdown_text(trace.torch_version, 40)}; the "
                   "settings in the sidebar are the ones it was recorded with, and do not run while it is shown: "
                   "remove the file to run live.")
        with drawing():
            show(trace)
    elif left_queue(config):
        return
    elif choice == MEMORY:
        show_memory(config)
    elif choice == COMPARE:
        (first_config, second_config), changed = fit_pair(config, pair())
        if changed is not None:
            say(changed)
        first, second = run(first_config, page=config), run(second_config, page=config)
        if first is not None and second is not None:
            with drawing():
                show_pair(first, second)
    else:
        trace = run(config)
        if trace is not None:
            with drawing():
                show(trace)
