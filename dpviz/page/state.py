"""What every part of the page shares: the session state's keys, the engine choice and a few small helpers.

Nothing here draws more than a warning: the sidebar, the runs and the tabs use it.
"""
from __future__ import annotations

import streamlit as st

from dpviz.echo import markdown_text
from dpviz.engines import ENGINES
from dpviz.page import room
from dpviz.page.session import Views
from dpviz.trace import Trace
from dpviz.page.link import COMPARE, MEMORY, PAIR

PRESENT = "presenting"  # the presentation toggle: larger type in every chart
SHOWN_TAB = "shown_tab"  # the label of the tab shown last, kept apart from the tabs' own state
TAB = "tab"  # the views' tabs: the shown one's label, in the session's state
ENGINE = "engine_choice"  # the engine control: an engine's name, COMPARE or MEMORY (the config's engine is an engine's)
FIRST_ENGINE, SECOND_ENGINE = "compare_first", "compare_second"  # the two engines COMPARE sets side by side
LEFT_QUEUE = "left_queue"  # the settings whose wait for room the visitor gave up
UPLOAD = "upload_file"  # the trace uploader's key
OPEN_PRESET = "open_preset"  # the preset a link or a button asked for: its run opens on the tab that shows it
SIDE_BY_SIDE = "side_by_side"  # both engines' charts in two columns rather than one above the other
CHOICES = {**{name: spec.label for name, spec in ENGINES.items()}, COMPARE: "Two engines, compared",
           MEMORY: "Memory, every engine"}


def pair() -> tuple[str, str]:
    """The two engines a comparison sets side by side, as the sidebar holds them (PAIR until it holds two)."""
    chosen = (st.session_state.get(FIRST_ENGINE, PAIR[0]), st.session_state.get(SECOND_ENGINE, PAIR[1]))
    return chosen if chosen[0] != chosen[1] and all(name in ENGINES for name in chosen) else PAIR


def engine_of(choice: str) -> str:
    """The engine a choice runs its settings on (COMPARE: the second of the pair, the first runs beside it)."""
    return pair()[1] if choice == COMPARE else PAIR[1] if choice == MEMORY else choice


def say(sentence: str) -> None:
    """A warning sentence, shown as text: it may name a value from the link or a file."""
    st.warning(markdown_text(sentence))
    room.notice(sentence)


def views() -> Views:
    """This session's figures, built once per trace and arguments."""
    return st.session_state.setdefault("views", Views())


def side_key(trace: Trace, key: str) -> str:
    """A widget's key, the side's engine in front when two engines are shown."""
    return f"{trace.engine}_{key}" if st.session_state.get(ENGINE) == COMPARE else key
