"""A run asked for by the page: from this session's recent runs, or recorded now once the server has room for
it, with a progress bar, a place in the queue the visitor can leave, and an end when the tab closes."""
from __future__ import annotations

import contextlib

import streamlit as st

from dpviz.config import ENGINE_OPTIONS, RunConfig
from dpviz.engines import ENGINES, vocabulary
from dpviz.engines.run import runnable
from dpviz.page.budget import BUDGET, NeverFits, Place
from dpviz.page.run_costs import price, seconds
from dpviz.page.session import Runs, let_go_oldest
from dpviz.trace import Trace
from dpviz.analysis.wording import plural
from dpviz.page.state import LEFT_QUEUE, say


def waiting_for_room(config: RunConfig, page: RunConfig):
    """Hold the server-wide memory budget for a run, at its price, saying while it waits its place and about
    how long; the visitor can leave the queue (for the page's settings `page`: every engine's run, on the pages
    of several), and one who closes the tab leaves it too. NeverFits when the run could not fit this host."""
    box = st.empty()
    message = []
    processes = ENGINES[config.engine].processes
    what = f"This run of {plural(config.gpus, vocabulary(config.engine).lane_noun)}" if processes else "This run"  # ranks, stages

    def waiting(place: Place) -> None:
        still_here()
        if not message:  # once: a widget made again at every look would clash with itself
            with box.container():
                message.append(st.empty())
                st.button("Leave the queue", key=f"leave_queue_{config.engine}", on_click=leave_queue, args=(page,))
        message[0].info(f"Waiting for room: {plural(place.ahead, 'run')} {'is' if place.ahead == 1 else 'are'} ahead "
                        f"of this one, running or waiting; it should start in {about(place.seconds)}. {what} starts as "
                        "soon as this server has the memory for it. You can leave the queue, or change a setting.")

    @contextlib.contextmanager
    def held():
        with BUDGET.hold(price(config), seconds(config), waiting, make_room=let_go_oldest):
            box.empty()  # the message and its button go: the run has started
            yield

    return held()


def about(seconds: float) -> str:
    """A wait in a visitor's words: "a few seconds", "about 40 seconds", "about 3 minutes"."""
    if seconds < 10:
        return "a few seconds"
    if seconds < 90:
        return f"about {round(seconds / 5) * 5:.0f} seconds"
    return f"about {round(seconds / 60):.0f} minutes"


def never_fits(config: RunConfig) -> str:
    """The one sentence for a run this host could not hold even alone."""
    mb = lambda b: f"{b / 10**6:,.0f} MB"
    return (f"This run would need about {mb(price(config))} of memory and this server has {mb(BUDGET.room_alone())} "
            f"for runs, so it cannot run here: choose fewer rows, a smaller input or fewer "
            f"{'ranks' if ENGINES[config.engine].processes else 'devices'}.")


def leave_queue(page: RunConfig) -> None:
    st.session_state[LEFT_QUEUE] = page


class Left(Exception):
    """The visitor's tab has closed: the run stops and gives back its processes and its place."""


def still_here() -> None:
    """Raise Left when this session's browser has gone (a closed tab): its script would run on otherwise."""
    from streamlit.runtime import Runtime
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    context = get_script_run_ctx()
    if Runtime.exists() and context is not None and not Runtime.instance().is_active_session(context.session_id):
        raise Left


def run(config: RunConfig, page: RunConfig | None = None) -> Trace | None:
    """The trace of `config`, from this session's recent runs or recorded now (waiting for room first);
    `page` is the page's own settings, which leaving the queue applies to (both runs of a comparison)."""
    config, reason = runnable(config)
    if reason:
        say(reason)
    runs: Runs = st.session_state.setdefault("runs", Runs())
    if config in runs:
        return runs.get(config)
    engine = ENGINES[config.engine]
    unit = engine.unit
    where = f" on {config.gpus} processes" if engine.processes else ""

    def progress(done: int, total: int) -> None:
        still_here()  # a closed tab ends the run here, and its processes with it
        bar.progress(done / total, text=f"{unit.title()} {done:,} of {total:,}")

    bar = st.empty()
    try:
        with waiting_for_room(config, page or config):
            bar.progress(0.0, text=f"Running {plural(config.num_batches, unit)}{where} ...")
            trace = runs.get(config, progress, still_here)
    except Left:  # nobody is there to read what happened
        return None
    except NeverFits:
        bar.empty()
        st.error(never_fits(config))
        return None
    except Exception as error:  # e.g. CUDA out of memory on a real GPU: say so, keep the page alive
        bar.empty()
        kind = getattr(error, "kind", type(error).__name__)  # a run's process says what its exception was
        st.error(f"The run failed: {kind}: {str(error).splitlines()[0] if str(error) else ''}")
        return None
    bar.empty()
    return trace


def left_queue(page: RunConfig) -> bool:
    """Whether the visitor left the queue for the page's settings, offering to join again (once a page)."""
    if st.session_state.get(LEFT_QUEUE) != page:
        return False
    st.info("You left the queue: this run has not started. Change a setting, or join the queue again.")
    st.button("Join the queue again", key="join_queue", on_click=lambda: st.session_state.pop(LEFT_QUEUE, None))
    return True


def same_settings(config: RunConfig, engine: str) -> RunConfig:
    """`config`'s settings for `engine`: another engine's own options left out."""
    own = ENGINES[engine].unset
    return RunConfig(**{**config.to_dict(), **{k: v for k, v in ENGINE_OPTIONS.items() if k not in own}, "engine": engine})
