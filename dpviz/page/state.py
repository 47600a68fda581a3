"""What every part of the page shares: the session state's keys, the engine choice and a few small helpers.

Nothing here draws more than a warning: the sidebar, the runs and the tabs use it.
"""
from __future__ import annotations

import streamlit as st

from dpviz.echo import markdown_text
from dpviz.engines import ENGINES
from dpviz.page.session import Views
from dpviz.trace import Trace
from dpviz.page.link import BOTH, MEMORY, PAIR

PRESENT = "presenting"  # the presentation toggle: larger type in every chart
SHOWN_TAB = "shown_tab"  # the label of the tab shown last, kept apart from the tabs' own state
TAB = "tab"  # the views' tabs: the shown one's label, in the session's state
ENGINE = "engine_choice"  # the engine control: an engine's name, or BOTH (the config's engine is an engine's)
LEFT_QUEUE = "left_queue"  # the settings whose wait for room the visitor gave up
UPLOAD = "upload_file"  # the trace uploader's key
OPEN_PRESET = "open_preset"  # the preset a link or a button asked for: its run opens on the tab that shows it
SIDE_BY_SIDE = "side_by_side"  # both engines' charts in two columns rather than one above the other
CHOICES = {**{name: spec.label for name, spec in ENGINES.items()}, BOTH: "Both, compared",
           MEMORY: "Memory, every engine"}


def engine_of(choice: str) -> str:
    """The engine a choice runs its settings on (BOTH: the second of the pair, the first runs beside it)."""
    return PAIR[1] if choice in (BOTH, MEMORY) else choice


def say(sentence: str) -> None:
    """A warning sentence, shown as text: it may name a value from the link or a file."""
    st.warning(markdown_text(sentence))


def views() -> Views:
    """This session's figures, built once per trace and arguments."""
    return st.session_state.setdefault("views", Views())


def side_key(trace: Trace, key: str) -> str:
    """A widget's key, the side's engine in front when both engines are shown."""
    return f"{trace.engine}_{key}" if st.session_state.get(ENGINE) == BOTH else key
