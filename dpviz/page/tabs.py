"""The views' tabs: what happened above them, each view with its control (a slider over batches, a window, a
choice of sampled batches, a block of text), and the Both page's comparison and side-by-side views."""
from __future__ import annotations

import dataclasses

import streamlit as st

from dpviz.echo import MESSAGE_LIMIT, code_span, markdown_text
from dpviz.engines import ENGINES
from dpviz.figures.style import presentation
from dpviz.figures.views import BATCH, SAMPLED, TEXT, VIEWS, WHOLE, WINDOW, View
from dpviz.presets import COMPARE_PRESETS, preset_of
from dpviz.trace import Trace
from dpviz.analysis.wording import describe_devices, plural
from dpviz.page.findings import downloads, what_happened
from dpviz.page.state import PRESENT, SHOWN_TAB, SIDE_BY_SIDE, TAB, side_key, views

CHART_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"scale": 2}}
COMPARE = "Compare"  # the side-by-side page's first tab


def show_outcome(trace: Trace) -> None:
    """The preset being shown, the error that ended the run and the warnings, above the views."""
    # Few boxes above the tabs, so a projector's first screen still reaches the chart: the devices' sentence
    # shares the pitfall's box, and the run's own error is said once.
    devices = describe_devices(trace)
    preset = preset_of(trace.config)
    if preset is not None:
        st.info(f"**Pitfall: {preset.title}.** {preset.look_for} [Link to this preset](?preset={preset.name})  \n"
                f"{devices}")
    else:
        (st.success if trace.backend == "cuda" else st.info)(devices)
    failure = trace.failure
    unit = trace.spec.unit
    if failure is not None:
        whose = trace.vocabulary.word("own_error")
        own = "" if failure.original.strip() in failure.headline else \
            f"  \n{whose}: {code_span(failure.original, MESSAGE_LIMIT)}"
        st.error(f"**{unit.title()} {failure.batch:,} failed**, as it would in your training loop: "
                 f"{code_span(failure.headline, MESSAGE_LIMIT)}{own}")
        with st.expander("The whole error, as Python prints it"):
            st.code(f"{failure.type}: {failure.message}", language=None)
    for note in trace.warnings:
        st.warning(f"{code_span(f'{note.category}: {note.message}', MESSAGE_LIMIT)} "
                   f"({note.count:,} time{'s' if note.count != 1 else ''}, "
                   f"first in {unit} {note.batch:,})")


def sampled_batch(trace: Trace, sampled: list[int], key: str) -> int:
    """A radio over the sampled batches (first, last, failing), kept valid when a new run samples others."""
    if len(sampled) == 1:
        return sampled[0]
    last = len(trace.batches) - 1
    failed = trace.failure.batch if trace.failure else None
    if st.session_state.get(key) not in sampled:  # a failed run opens on the batch that failed
        st.session_state[key] = failed if failed in sampled else sampled[0]

    def name(b: int) -> str:
        what = "the first" if b == 0 else "failed" if b == failed else "the last" if b == last else ""
        return f"{trace.spec.unit} {b:,}" + (f" ({what})" if what else "")

    return st.radio(trace.spec.unit.title(), sampled, horizontal=True, key=key, format_func=name)


def sampled_chart(trace: Trace, sampled: list[int], build, name: str, missing: str) -> None:
    """A view drawn for one of the batches the trace sampled, picked with a radio; `missing` when none was."""
    if not sampled:
        st.info(missing)
    else:
        chart(trace, build, sampled_batch(trace, sampled, side_key(trace, f"{name}_batch")), key=f"{name}_chart")


def chart(trace: Trace, build, *args, key: str) -> None:
    """Draw `build(trace, *args)`, built once per trace and arguments in this session (and once more in
    larger type, for presenting)."""
    fig = views().get(trace, presented, build, *args) if st.session_state.get(PRESENT) else views().get(trace, build, *args)
    st.plotly_chart(fig, width="stretch", config=CHART_CONFIG, key=side_key(trace, key))


def presented(trace: Trace, build, *args):
    """`build`'s figure in larger type, for a projector: a copy, the plain one stays as it is."""
    return presentation(views().get(trace, build, *args))


def batch_view(trace: Trace, view: View) -> None:
    """A slider over every batch (the last one first)."""
    last, key = len(trace.batches) - 1, side_key(trace, f"{view.key}_batch")
    if st.session_state.get(key, last) > last:  # a new run may have fewer batches
        st.session_state[key] = last
    st.session_state.setdefault(key, last)
    batch = st.slider(trace.spec.unit.title(), 0, last, key=key) if last > 0 else 0
    chart(trace, view.build, batch, key=view.key)


def window_view(trace: Trace, view: View) -> None:
    """A slider over windows of consecutive batches, when the trace has more than one window fits; where the
    view can, a switch to draw a few batches one by one instead of the window's summary."""
    window, build, first, key = view.window(trace), view.build, 0, side_key(trace, f"{view.key}_first")
    if view.detail_for(trace) is not None and len(trace.batches) > view.detail_window:
        if st.toggle(f"Batch by batch ({view.detail_window} at a time)", key=side_key(trace, f"{view.key}_detail"),
                     help="Off: a window of many batches, drawn as one typical batch. On: a few batches, each drawn."):
            window, build = view.detail_window, view.detail
    if len(trace.batches) > window:
        st.session_state.setdefault(key, 0)
        if st.session_state[key] > len(trace.batches) - 1:
            st.session_state[key] = 0
        unit = trace.spec.unit
        first = st.slider(f"First {unit} of the window ({plural(window, unit)})", 0,
                          len(trace.batches) - 1,
                          step=window, key=key)
    chart(trace, build, first, key=view.key)


def text_view(trace: Trace, view: View) -> None:
    """A block of text (the tutorial log), its lines wrapped so a narrow window still shows each line's end
    (the output size), and scrolled within a screen's height so What happened stays near."""
    text = views().get(trace, view.build)
    st.code(text, language=None, wrap_lines=True, height=520 if text.count("\n") > 24 else "content")


CONTROLS = {
    WHOLE: lambda trace, view: chart(trace, view.build, key=view.key),
    BATCH: batch_view,
    WINDOW: window_view,
    SAMPLED: lambda trace, view: sampled_chart(trace, view.sampled(trace), view.build, view.key, view.missing),
    TEXT: text_view,
}


def view_of(trace: Trace, view: View) -> None:
    if not view.draws(trace):
        st.info(f"{view.tab} draws {' and '.join(ENGINES[e].runs for e in view.engines)} runs only; "
                f"this run is {trace.spec.runs}.")
    else:
        CONTROLS[view.control](trace, view)


def view_tabs(labels: list[str]):
    """The views' tabs, the one shown before selected again when a run adds a tab (Pitfall) or renames one.

    Streamlit makes tabs with other labels, or another default, a new widget, which opens on its default:
    so the default is chosen when the labels change (the tab shown last) and kept while they stay, and
    a click decides in between."""
    state = st.session_state.setdefault(SHOWN_TAB, {"labels": None, "default": None, "shown": None})
    if state["labels"] != labels:
        state["labels"], state["default"] = labels, state["shown"] if state["shown"] in labels else None
    tabs = st.tabs(labels, key=TAB, on_change="rerun", default=state["default"])
    state["shown"] = st.session_state.get(TAB)
    return tabs


def present(shown_views, *traces: Trace) -> list[View]:
    """The views with something to draw for one of `traces` (the Pitfall view only for a run that has one)."""
    cache = views()
    return [v for v in shown_views if v.shown is None or any(cache.get(t, v.shown) for t in traces)]


def show(trace: Trace) -> None:
    show_outcome(trace)
    # Only the shown tab's view is built and sent (a click on another reruns the page, from the session's
    # runs and figures): the others' figures are work the first screen does not need.
    # The views that draw this run's engine first: the first screen shows a chart, not a "DataParallel only".
    shown = sorted(present(VIEWS, trace), key=lambda view: not view.draws(trace))
    labels = [view.tab.replace("per batch", f"per {trace.spec.unit}") for view in shown]
    for view, tab in zip(shown, view_tabs(labels)):
        with tab:
            if tab.open:
                view_of(trace, view)
    # Below the chart: on a projector's 1024 × 768 the first screen is the chart, and the key figures (a
    # pass over the run's tables) come a moment after it.
    what_happened(trace)
    st.sidebar.header("Files")
    downloads(trace)


def show_both(dp: Trace, ddp: Trace) -> None:
    """The same settings under DataParallel and DDP: what moves, then every view for each, one above the other
    (or side by side, on request)."""
    from dpviz.analysis.compare import comparison  # here: pandas, which a page of one engine never needs
    from dpviz.figures.compare import comparison_figure

    shown = next((p for p in COMPARE_PRESETS.values() if p.config == dataclasses.replace(ddp.config, backend="auto")), None)
    if shown is not None:  # dpviz's own words: what the comparison's preset is there to show
        st.info(f"**{shown.title}.** {shown.look_for}")
    left, right = st.columns(2, gap="large")
    for column, trace in ((left, dp), (right, ddp)):
        with column:
            st.markdown(f"#### {trace.spec.runs}")
            show_outcome(trace)
    tabs = [COMPARE] + [view.tab for view in present(VIEWS, dp, ddp)]
    for label, tab in zip(tabs, view_tabs(tabs)):
        with tab:
            if not tab.open:
                continue
            if label == COMPARE:
                figure = comparison_figure(dp, ddp)
                st.plotly_chart(presentation(figure) if st.session_state.get(PRESENT) else figure, width="stretch",
                                config=CHART_CONFIG, key="compare_chart")
                for sentence in comparison(dp, ddp):
                    st.markdown(markdown_text(sentence, 2_000))  # dpviz's own sentence, naming lanes: escaped, not cut
                continue
            view = next(v for v in VIEWS if v.tab == label)
            # Half a 1024-pixel window is too narrow for a chart's title, legend and lanes: one above the
            # other unless the visitor has the room and asks for columns.
            if st.toggle("Side by side (wide screens)", key=SIDE_BY_SIDE,
                         help="DataParallel's chart beside DDP's, each half as wide; off, one above the other."):
                for column, trace in zip(st.columns(2, gap="medium"), (dp, ddp)):
                    with column:
                        view_of(trace, view)
            else:
                for trace in (dp, ddp):
                    st.markdown(f"##### {trace.spec.runs}")
                    view_of(trace, view)
    st.subheader("What happened")
    for column, trace in zip(st.columns(2, gap="large"), (dp, ddp)):
        with column:
            st.markdown(f"#### {trace.spec.runs}")
            what_happened(trace, columns=1, heading=False)
    st.sidebar.header("Files")
    downloads(dp)
    downloads(ddp)
