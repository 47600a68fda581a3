"""The views' tabs: what happened above them, each view with its control (a slider over batches, a window, a
choice of sampled batches, a block of text), and a comparison's first tab and its two runs' views."""
from __future__ import annotations

import dataclasses
import re

import streamlit as st

from dpviz.analysis.failure_words import failure_parts
from dpviz.analysis.opening_step import opening_step
from dpviz.echo import MESSAGE_LIMIT, code_span, markdown_text, one_line
from dpviz.figures.chart_details import chart_details
from dpviz.figures.presenting import presentation
from dpviz.figures.views import BATCH, SAMPLED, TEXT, WHOLE, WINDOW, View, views_of
from dpviz.presets import COMPARE_PRESETS, preset_of
from dpviz.trace import Trace
from dpviz.analysis.wording import counted, describe_devices, numbered, plural
from dpviz.engines.run import cuda_device_count
from dpviz.page import room
from dpviz.page.room import left_px
from dpviz.page.findings import downloads, failure_markdown, keep_units, what_happened
from dpviz.page.state import OPEN_PRESET, PRESENT, SHOWN_TAB, SIDE_BY_SIDE, TAB, side_key, views

CHART_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"scale": 2}}
COMPARE = "Compare"  # the side-by-side page's first tab: what each device sends, then what it holds by kind
# Characters of the box above the tabs, its failure's cause cut to what is left: two lines at 1024 pixels, presented
# (a preset's title, its tab and its cause of 220 characters took three, and pushed the chart off the first screen).
OPENING_LIMIT = 172
OPENING_CAUSE_MIN = 40  # a cause is never cut shorter: the error's type and the start of its words
FIRST_SENTENCE = re.compile(r".*?\.(?=\s+[A-Z])")  # up to a full stop that a new sentence follows


def tab_label(view: View, trace: Trace) -> str:
    """A view's tab in the trace's words: a tab naming its unit ("… per batch") says "… per step" under DDP."""
    return view.tab.replace("per batch", f"per {trace.spec.unit}")


def failed_unit(trace: Trace) -> str:
    """'Batch 4', the failed batch or step as a reader counts it (from 1)."""
    return f"{trace.spec.unit.title()} {counted(trace.failure.batch)}"


def opening_note(trace: Trace, tab: str | None) -> None:
    """Above the tabs, one short box: the preset being shown and the tab that shows it, or that the run
    failed. A projector's first screen is the heading, this line, the tabs and the chart; what to look for,
    the error and the devices are under the chart (outcome_details)."""
    preset = preset_of(trace.config)
    where = f" Shown in **{tab}**." if tab else ""  # what to look for: under the chart
    if preset is not None:
        # Under a preset's title the failure is expected: its unit and torch's cause.
        lead = f"**Pitfall: {preset.title}.**{where}" + (f" {failed_unit(trace)} failed" if trace.failure else "")
        st.info(lead + _cause(trace, lead))
        room.notice(lead + _cause(trace, lead))
    elif trace.failure is not None:
        lead = (f"**{failed_unit(trace)} failed**, as it would in your training loop (the whole error is under the "
                "chart)")
        st.error(lead + _cause(trace, lead))
        room.notice(lead + _cause(trace, lead))


def _cause(trace: Trace, lead: str) -> str:
    """': `torch's cause`', its first sentence cut at a whole word, so that the box with its `lead` keeps to two
    lines on a projector (the cause's words differ from run to run: gloo's "Timed out waiting 3000ms ..." or
    "Connection closed by peer [...]. This is typically caused by ..."); '' when the run did not fail."""
    if trace.failure is None:
        return ""
    shown = len(lead.replace("**", ""))  # as the box shows it, markup gone
    cause = failure_parts(trace)[2]
    first = FIRST_SENTENCE.match(cause)
    return f": {code_span(one_line(first.group(0) if first else cause, max(OPENING_CAUSE_MIN, OPENING_LIMIT - shown)))}"


def outcome_details(trace: Trace) -> None:
    """Under the chart: what the preset shows, the devices, the error that ended the run and the warnings."""
    preset = preset_of(trace.config)
    if preset is not None:
        st.info(f"**Pitfall: {preset.title}.** {preset.look_for} [Link to this preset](?preset={preset.name})")
    devices = describe_devices(trace, cuda_device_count())
    (st.success if trace.backend == "cuda" else st.info)(devices)
    failure = trace.failure
    unit = trace.spec.unit
    if failure is not None:
        st.error(f"**{failed_unit(trace)} failed**, as it would in your training loop: {failure_markdown(trace)}")
        with st.expander("The whole error, as Python prints it"):
            st.code(failure.printed, language=None)
    for note in trace.warnings:
        st.warning(f"{code_span(f'{note.category}: {note.message}', MESSAGE_LIMIT)} "
                   f"({note.count:,} time{'s' if note.count != 1 else ''}, "
                   f"first in {unit} {counted(note.batch)})")


def opening_batch(trace: Trace) -> int:
    """The batch every view of one batch opens on (One step, Flow, Step through, Inputs, Memory): one rule for every
    engine (dpviz.analysis.opening_step), so that a class flipping engines sees the same step."""
    return opening_step(trace)


def shared_batch(trace: Trace) -> int:
    """The batch shown by every view of one batch, one value per run: a new run opens on its opening batch."""
    key, of = side_key(trace, "batch"), side_key(trace, "batch_of")
    if st.session_state.get(of) != trace.config or not 0 <= st.session_state.get(key, -1) < len(trace.batches):
        st.session_state[key], st.session_state[of] = opening_batch(trace), trace.config
    return st.session_state[key]


def share(trace: Trace, key: str, index=lambda value: value) -> None:
    """A widget's callback: its value becomes the batch every view of one batch shows."""
    st.session_state[side_key(trace, "batch")] = index(st.session_state[key])


def sampled_batch(trace: Trace, sampled: list[int], key: str, opening: int | None = None) -> int:
    """A radio over the sampled batches (first, last, failing), on the shared batch or the nearest sampled; on
    `opening` instead the first time this run's view is shown, when its engine opens it elsewhere."""
    shared = shared_batch(trace)
    if opening is not None and st.session_state.get(f"{key}_of") != trace.config:
        shared = opening
    st.session_state[f"{key}_of"] = trace.config
    chosen = min(sampled, key=lambda b: (abs(b - shared), -b))
    if len(sampled) == 1:
        return chosen
    last, total = len(trace.batches) - 1, len(trace.batches)
    failed = trace.failure.batch if trace.failure else None
    st.session_state[key] = chosen

    def name(b: int) -> str:
        what = "the first" if b == 0 else "failed" if b == failed else "the last" if b == last else ""
        return numbered(b, total, trace.spec.unit) + (f" ({what})" if what else "")

    # Presenting: each choice names its unit ("step 1 of 4"), so the label's line above them goes, for the chart
    present = bool(st.session_state.get(PRESENT))
    room.add(room.BARE_CONTROL_PX if present else room.CONTROL_PX)
    return st.radio(trace.spec.unit.title(), sampled, horizontal=True, key=key, format_func=name,
                    on_change=share, args=(trace, key), label_visibility="collapsed" if present else "visible")


def sampled_chart(trace: Trace, sampled: list[int], build, name: str, missing: str, then=None) -> None:
    """A view drawn for one of the batches the trace sampled, picked with a radio; `missing` when none was; `then`,
    the view's second figure, under it."""
    if not sampled:
        st.info(missing)
        return
    part = f"{name}_opening"  # an engine's own opening for this view (ZeRO-1's Memory: a step of sharded state)
    opening = int(trace.spec.part(part)(trace)) if trace.spec.has(part) else None
    chart(trace, build, sampled_batch(trace, sampled, side_key(trace, f"{name}_batch"), opening), key=f"{name}_chart",
          then=then)


def chart(trace: Trace, build, *args, key: str, then=None) -> None:
    """Draw `build(trace, *args)`, built once per trace and arguments in this session (and once more in
    larger type, for presenting); then the view's second figure, `then(trace, *args)`, under it where it has one."""
    present = st.session_state.get(PRESENT)
    room = left_px()  # Presenting: the plot laid out to end on the first screen, under what the page put above it
    fig = views().get(trace, presented, build, room, *args) if present else views().get(trace, build, *args)
    st.plotly_chart(fig, width="stretch", config=CHART_CONFIG, key=side_key(trace, key))
    details = chart_details(fig)  # the chart's note stays a few lines: the rest waits here for who asks
    if details:
        with st.expander("More on these times"):
            st.markdown(details)  # dpviz's own sentences and figures: nothing from the trace's text
    second = None if then is None else views().get(trace, then, *args)
    if second is not None:
        shown = views().get(trace, presented, then, room, *args) if present else second
        st.plotly_chart(shown, width="stretch", config=CHART_CONFIG, key=side_key(trace, f"{key}_then"))


def presented(trace: Trace, build, room_px: int, *args):
    """`build`'s figure in larger type, for a projector, its plot ending in the first screen's `room_px` left under
    what is above it: a copy, the plain one stays as it is."""
    return presentation(views().get(trace, build, *args), room_px=room_px)


def batch_view(trace: Trace, view: View) -> None:
    """A slider over every batch, numbered from 1 as the chart's title numbers it, on the shared batch."""
    total, key = len(trace.batches), side_key(trace, f"{view.key}_batch")
    batch = shared_batch(trace)
    if total > 1:
        st.session_state[key] = batch + 1
        batch = st.slider(trace.spec.unit.title(), 1, total, key=key, on_change=share,
                          args=(trace, key, lambda value: value - 1)) - 1
        room.add(room.CONTROL_PX)
    chart(trace, view.build, batch, key=view.key, then=view.then)


def window_view(trace: Trace, view: View) -> None:
    """A slider over windows of consecutive batches, when the trace has more than one window fits; where the
    view can, a switch to draw a few batches one by one instead of the window's summary."""
    window, build, first, key = view.window(trace), view.build, 0, side_key(trace, f"{view.key}_first")
    if view.detail_for(trace) is not None and len(trace.batches) > view.detail_window:
        if st.toggle(f"Batch by batch ({view.detail_window} at a time)", key=side_key(trace, f"{view.key}_detail"),
                     help="Off: a window of many batches, drawn as one typical batch. On: a few batches, each drawn."):
            window, build = view.detail_window, view.detail
        room.add(room.TOGGLE_PX)
    total = len(trace.batches)
    if total > window:
        st.session_state.setdefault(key, 1)
        if not 1 <= st.session_state[key] <= total:
            st.session_state[key] = 1
        unit = trace.spec.unit
        first = st.slider(f"First {unit} of the window ({plural(window, unit)})", 1, total, step=window, key=key) - 1
        room.add(room.CONTROL_PX)
    chart(trace, build, first, key=view.key)


def text_view(trace: Trace, view: View) -> None:
    """A block of text (the tutorial log), its lines wrapped so a narrow window still shows each line's end
    (the output size), and scrolled within a screen's height so What happened stays near."""
    text = views().get(trace, view.build)
    st.code(shapes_unbroken(text), language=None, wrap_lines=True, height=520 if text.count("\n") > 24 else "content")


SHAPE = re.compile(r"torch\.Size\(\[[^\]]*\]\)")


def shapes_unbroken(text: str) -> str:
    """`text` with each printed shape ("torch.Size([15, 5])") held on one line: the space after its commas a
    no-break space, so a wrapped line breaks between words, never inside the shape a class reads."""
    return SHAPE.sub(lambda shape: shape.group(0).replace(", ", ",\u00a0"), text)


CONTROLS = {
    WHOLE: lambda trace, view: chart(trace, view.build, key=view.key, then=view.then),
    BATCH: batch_view,
    WINDOW: window_view,
    SAMPLED: lambda trace, view: sampled_chart(trace, view.sampled(trace), view.build, view.key, view.missing, view.then),
    TEXT: text_view,
}


def view_of(trace: Trace, view: View) -> None:
    lacking = view.lacks(trace)  # a loaded file may lack what this view draws: said in its place
    if lacking is not None:
        st.info(markdown_text(lacking))
    else:
        CONTROLS[view.control](trace, view)


def view_tabs(labels: list[str], opening: str | None = None):
    """The views' tabs, the one shown before selected again when a run adds a tab (Pitfall) or renames one;
    `opening`, the tab a preset's lesson is in, selected when a link or a button asked for that preset.

    Streamlit makes tabs with other labels, or another default, a new widget, which opens on its default:
    so the default is chosen when the labels change (the tab shown last) and kept while they stay, and
    a click decides in between."""
    state = st.session_state.setdefault(SHOWN_TAB, {"labels": None, "default": None, "shown": None})
    if opening is not None and opening in labels:
        state["labels"], state["default"], state["shown"] = labels, opening, opening
        st.session_state[TAB] = opening
    elif state["labels"] != labels:
        state["labels"], state["default"] = labels, state["shown"] if state["shown"] in labels else None
    tabs = st.tabs(labels, key=TAB, on_change="rerun", default=state["default"])
    state["shown"] = st.session_state.get(TAB)
    return tabs


def present(shown_views, *traces: Trace) -> list[View]:
    """The views with something to draw for one of `traces` (the Pitfall view only for a run that has one)."""
    cache = views()
    return [v for v in shown_views if v.shown is None or any(cache.get(t, v.shown) for t in traces)]


def preset_tab(trace: Trace, shown: list[View]) -> str | None:
    """The tab that shows the lesson of the preset this run is, when it has that tab."""
    preset = preset_of(trace.config)
    view = next((v for v in shown if preset is not None and v.key == preset.opens), None)
    return tab_label(view, trace) if view is not None else None


def asked_for(*traces: Trace) -> bool:
    """Whether a link or a button asked for the preset these runs are (once): its run opens on its tab. Settings
    that happen to be a preset's keep the tab shown, as any other change of a control does."""
    asked = st.session_state.get(OPEN_PRESET)
    names = {p.name for p in [preset_of(t.config) for t in traces] + [compared(*traces)] if p is not None}
    if asked is None or asked not in names:
        return False
    del st.session_state[OPEN_PRESET]
    return True


def compared(*traces: Trace):
    """The comparison preset two engines' runs are, if any."""
    if len(traces) != 2:
        return None
    return next((p for p in COMPARE_PRESETS.values() if p.config == dataclasses.replace(traces[1].config, backend="auto")), None)


def show(trace: Trace) -> None:
    # Only the shown tab's view is built and sent (a click on another reruns the page, from the session's
    # runs and figures): the others' figures are work the first screen does not need. A view the run's
    # engine does not draw has no tab.
    shown = [view for view in present(views_of(trace), trace) if view.draws(trace)]
    labels = [tab_label(view, trace) for view in shown]
    lesson = preset_tab(trace, shown)
    opening_note(trace, lesson)
    for view, tab in zip(shown, view_tabs(labels, lesson if asked_for(trace) else None)):
        with tab:
            if tab.open:
                view_of(trace, view)
    # Below the chart: on a projector's 1024 × 768 the first screen is the chart; the preset's lesson, the
    # devices and the error, then the key figures (a pass over the run's tables) come a moment after it.
    outcome_details(trace)
    what_happened(trace)
    st.sidebar.header("Files")
    downloads(trace)


def same_step(*traces: Trace) -> None:
    """Open every view of one batch of two runs on the same step (a new pair of runs only): the earlier of the two
    engines' opening steps, which both have; each run's own slider moves it after."""
    step = min(opening_batch(trace) for trace in traces)
    for trace in traces:
        key, of = side_key(trace, "batch"), side_key(trace, "batch_of")
        if st.session_state.get(of) != trace.config:
            st.session_state[key], st.session_state[of] = min(step, len(trace.batches) - 1), trace.config


def show_pair(first: Trace, second: Trace) -> None:
    """The same settings under two engines: what moves, then every view for each, one above the other (or side by
    side, on request)."""
    from dpviz.analysis.compare import comparison  # here: what a page of one engine never needs
    from dpviz.analysis.memory_compare import reading
    from dpviz.figures.compare import comparison_figure, growth_figure
    from dpviz.figures.memory_compare import bytes_per_step_figure, memory_compare_figure

    pair = (first, second)
    shown = compared(first, second)
    same_step(first, second)
    if shown is not None:  # dpviz's own words: what the comparison's preset is there to show
        st.info(f"**{shown.title}.** Shown in **{COMPARE}**.")  # what to look for: under the chart
        room.notice(f"{shown.title}. Shown in {COMPARE}.")
    for trace in pair:
        if trace.failure is not None:
            st.error(f"**{trace.spec.runs}: {failed_unit(trace)} failed**; the error is under the chart.")
            room.notice(f"{trace.spec.runs}: {failed_unit(trace)} failed; the error is under the chart.")
    views_shown = [view for view in present(views_of(first, second), first, second)
                   if view.draws(first) or view.draws(second)]
    tabs = [COMPARE] + [view.tab for view in views_shown]
    opening = COMPARE if shown is not None and shown.opens == "compare" and asked_for(first, second) else None
    for label, tab in zip(tabs, view_tabs(tabs, opening)):
        with tab:
            if not tab.open:
                continue
            if label == COMPARE:
                figure = comparison_figure(first, second)
                st.plotly_chart(presentation(figure, room_px=left_px()) if st.session_state.get(PRESENT) else figure,
                                width="stretch", config=CHART_CONFIG, key="compare_chart")
                for sentence in comparison(first, second):
                    st.markdown(keep_units(markdown_text(sentence, 2_000)))  # dpviz's own sentence, naming lanes: escaped, not cut
                growth = growth_figure(first, second)  # how it grows with the devices: its own chart, under the lesson
                if growth is not None:
                    st.plotly_chart(presentation(growth) if st.session_state.get(PRESENT) else growth, width="stretch",
                                    config=CHART_CONFIG, key="growth_chart")
                # Under it, every device of both engines read at the same moment, in the same terms: a tab of its own
                # would push the tab strip past a projector's 1024 pixels.
                figure = memory_compare_figure(list(pair))
                st.plotly_chart(presentation(figure) if st.session_state.get(PRESENT) else figure, width="stretch",
                                config=CHART_CONFIG, key="by_kind_chart")
                said = reading(list(pair))
                if said:
                    st.markdown(keep_units(markdown_text(said, 2_000)))
                moved = bytes_per_step_figure(list(pair))  # what each device handed its collectives, and sent
                st.plotly_chart(presentation(moved) if st.session_state.get(PRESENT) else moved, width="stretch",
                                config=CHART_CONFIG, key="by_collective_chart")
                continue
            view = next(v for v in views_shown if v.tab == label)
            drawn = [trace for trace in pair if view.draws(trace)]  # a view one engine alone draws: its chart alone
            # Half a 1024-pixel window is too narrow for a chart's title, legend and lanes: one above the
            # other unless the visitor has the room and asks for columns (Presenting is laid out for a projector's
            # 1024: no switch over its chart).
            if len(drawn) > 1 and not st.session_state.get(PRESENT) and st.toggle("Side by side (wide screens)", key=SIDE_BY_SIDE,
                                            help=f"{first.spec.short}'s chart beside {second.spec.short}'s, each half "
                                                 "as wide; off, one above the other."):
                for column, trace in zip(st.columns(2, gap="medium"), drawn):
                    with column:
                        view_of(trace, view)
            else:
                # the run's name over its chart, and the switch over both where it is shown
                room.add(room.PAIR_HEADING_PX + (0 if st.session_state.get(PRESENT) or len(drawn) < 2 else room.TOGGLE_PX))
                for trace in drawn:
                    st.markdown(f"##### {trace.spec.runs}")
                    view_of(trace, view)
    if shown is not None:
        st.info(f"**{shown.title}.** {shown.look_for}")
    for column, trace in zip(st.columns(2, gap="large"), pair):
        with column:
            st.markdown(f"#### {trace.spec.runs}")
            outcome_details(trace)
    st.subheader("What happened")
    for column, trace in zip(st.columns(2, gap="large"), pair):
        with column:
            st.markdown(f"#### {trace.spec.runs}")
            what_happened(trace, columns=1, heading=False)
    st.sidebar.header("Files")
    for trace in pair:
        downloads(trace)
