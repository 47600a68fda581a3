"""The page "Memory, every engine" (engine=memory in a link): the same settings under every engine, one after
the other within the server's budget of ranks, and each device's memory by kind and the bytes it moves per step
(dpviz.figures.memory_compare): memory by kind first, with a one-line reading under it, then the
bytes per step in a chart of its own; then the same rules at real size (dpviz.page.real_size)."""
from __future__ import annotations

import streamlit as st

from dpviz.config import RunConfig
from dpviz.analysis.wording import counted
from dpviz.echo import markdown_text
from dpviz.engines import ENGINES
from dpviz.page import room
from dpviz.page.findings import failure_markdown, keep_units
from dpviz.page.running import run, same_settings
from dpviz.page.session import Runs, drawing
from dpviz.page.state import PRESENT

TITLE = "Where the memory goes: every engine at the same settings"
CHART_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"scale": 2}}


def compared() -> list[str]:
    """The engines drawn side by side: those whose devices all run the same rows' model."""
    return [name for name, spec in ENGINES.items() if spec.memory_page]


def show_memory(config: RunConfig) -> None:
    """Run `config` under each engine (from this session's recent runs when it has them), then draw them."""
    from dpviz.analysis.memory_compare import moments, reading  # here: a page of one engine never needs them
    from dpviz.figures.memory_compare import bytes_per_step_figure, memory_compare_figure
    from dpviz.figures.presenting import presentation

    preset = lesson(config)
    if preset is not None:  # above the chart, one line; what to look for under it
        st.info(f"**Pitfall: {preset.title}.** Shown in **Memory, every engine**.")
        room.notice(f"Pitfall: {preset.title}. Shown in Memory, every engine.")
    engines = compared()
    runs: Runs = st.session_state.setdefault("runs", Runs())
    runs.capacity = max(runs.capacity, len(engines))  # each engine's run kept: a rerun of the page records none again
    traces = []
    for name in engines:
        trace = run(same_settings(config, name), page=config)
        if trace is None:
            return  # the visitor left, or the run could not start: run() said why
        traces.append(trace)
    for trace in traces:
        if trace.failure is not None:
            st.error(f"**{trace.spec.runs}: {trace.spec.unit} {counted(trace.failure.batch)} failed**: "
                     f"{failure_markdown(trace)}")
            room.notice(f"{trace.spec.runs}: {trace.spec.unit} {counted(trace.failure.batch)} failed: "
                        f"{failure_markdown(trace)}")
    if not config.train:
        forward_only = ("Forward only: no gradients, no optimizer state, no all-reduce. Turn on **Train** (and choose "
                        "Adam as the optimizer, which every engine here then steps) to see what ZeRO-1 and FSDP shard.")
        st.info(forward_only)
        room.notice(forward_only)
    with drawing():
        figure = memory_compare_figure(traces)
        shown = presentation(figure, room_px=room.left_px()) if st.session_state.get(PRESENT) else figure
        st.plotly_chart(shown, width="stretch", config=CHART_CONFIG, key="memory_chart")
        st.markdown(keep_units(markdown_text(reading(traces), 2_000)))  # dpviz's own sentence: escaped, not cut
        read_at = moments(traces)  # each engine's step, in words the chart's one line of notes has no room for
        if read_at:
            with st.expander("More on when each device is read"):
                st.markdown(keep_units(markdown_text(f"{read_at[:1].upper()}{read_at[1:]}.", 2_000)))
        # What each device moves per step: a chart of its own under the lesson, past a projector's first screen.
        moved = bytes_per_step_figure(traces)
        st.plotly_chart(presentation(moved) if st.session_state.get(PRESENT) else moved, width="stretch",
                        config=CHART_CONFIG, key="memory_bytes_chart")
    if preset is not None:
        st.info(f"**What to look for.** {keep_units(markdown_text(preset.look_for, 2_000))}")
    from dpviz.page.real_size import show_real_size  # here: the plan's figure, which a page of one engine never needs

    show_real_size(config, traces)


def lesson(config: RunConfig):
    """The preset these settings are, when its lesson is read on this page (whatever engine it names)."""
    import dataclasses

    from dpviz.presets import ALL_PRESETS, EVERY_ENGINE

    auto = dataclasses.replace(config, backend="auto")
    return next((p for p in ALL_PRESETS.values() if p.opens == EVERY_ENGINE
                 and dataclasses.replace(p.config, engine=config.engine) == auto), None)
