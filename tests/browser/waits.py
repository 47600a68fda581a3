"""What the browser tests wait for, waited for as itself rather than as a fixed time: the script's run that an action
starts (a click, a toggle) having ended, and plotly having drawn every chart shown at the window's present size.

Every browser context is made through `watched` (or a page's context passed to it before the page opens the app): it
installs RUN_COUNTER, which counts the script runs the server reports finished. An action that reruns the script is
wrapped in `rerun`: the count is read before it, and the wait ends once the count has grown and the page shows the
script idle. The count, not the page's idle state alone, because the page is idle too in the moment between a click
and the run it starts; and the server's own message, not the page's attribute changing to running and back, because
a short run's two states can reach React in one batch and never be drawn.
"""
from __future__ import annotations

from typing import Callable

IDLE = "[data-testid=stApp][data-test-script-state=notRunning]"
ACTIVE_PANEL = "[data-testid=stTabPanel]:not([data-st-inactive])"

# Runs in every page before Streamlit's code: counts the ForwardMsgs of type script_finished (field 6 of ForwardMsg,
# streamlit/proto/ForwardMsg.proto) the page's websockets receive, but for a run ended early for a rerun. A ForwardMsg
# is serialised in field order: its hash (1) and metadata (2), length-delimited, then the one field of its type.
RUN_COUNTER = """(() => {
  if (window.__runsFinished !== undefined) return;
  window.__runsFinished = 0;
  const FINISHED_TAG = (6 << 3) | 0;  // field 6, a varint (the enum ScriptFinishedStatus)
  const EARLY_FOR_RERUN = 2;  // a run cut short for the next one, which is what the tests wait for
  const varint = (bytes, at) => { let value = 0, shift = 0, byte;
    do { byte = bytes[at++]; value += (byte & 0x7f) * 2 ** shift; shift += 7; } while (byte & 0x80);
    return [value, at]; };
  const finished = bytes => {
    let at = 0;
    while (at < bytes.length) {
      let tag; [tag, at] = varint(bytes, at);
      if ((tag >> 3) > 2 || (tag & 7) !== 2) return tag === FINISHED_TAG && varint(bytes, at)[0] !== EARLY_FOR_RERUN;
      let length; [length, at] = varint(bytes, at);
      at += length;
    }
    return false;
  };
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', event => {
        if (event.data instanceof ArrayBuffer && finished(new Uint8Array(event.data))) window.__runsFinished += 1;
      });
    }
  };
})()"""

# Every chart in sight has been drawn by plotly at its box's present width: Streamlit gives each chart (every one is
# width="stretch") its box's width when the box changes, and plotly lays it out and draws its SVG at that width, in
# promises of its own; Streamlit shows a skeleton while plotly's code loads. A tab's hidden panel is left out (its
# charts are drawn when shown).
DRAWN = """() => {
  if (document.querySelector('[data-testid=stSkeleton]')) return false;
  const charts = [...document.querySelectorAll('[data-testid=stPlotlyChart]')]
    .filter(c => !c.closest('[data-testid=stTabPanel][data-st-inactive]') && c.offsetParent !== null);
  return charts.every(c => {
    const plot = c.querySelector('.js-plotly-plot'), svg = plot && plot.querySelector('.main-svg');
    if (!svg || !plot._fullLayout || plot._transitioning || (plot._promises && plot._promises.length)) return false;
    const width = plot._fullLayout.width;
    return Math.abs(width - c.clientWidth) <= 1 && Math.abs(+svg.getAttribute('width') - width) <= 1;
  });
}"""

# Two animation frames: what plotly and React set in the frame the chart was drawn in has been laid out and painted.
TWO_FRAMES = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))"


def watched(context):
    """The browser context `context`, its pages counting the script's finished runs (see `rerun`)."""
    context.add_init_script(RUN_COUNTER)
    return context


def runs_finished(page) -> int:
    count = page.evaluate("() => window.__runsFinished")
    if count is None:
        raise RuntimeError("the page counts no script runs: make its browser context with waits.watched()")
    return count


def idle(page, runs_before: int) -> None:
    """Until a run after the `runs_before`th has finished and the page shows the script idle."""
    page.wait_for_function("([before, idle]) => window.__runsFinished > before && !!document.querySelector(idle)",
                           arg=[runs_before, IDLE])


def drawn(page, timeout: float | None = None) -> None:
    """Until plotly has drawn every chart in sight at the window's present size, and the frame after it is painted
    (`timeout` ms, or the page's own)."""
    page.wait_for_function(DRAWN, timeout=timeout)
    page.evaluate(TWO_FRAMES)


def rerun(page, action: Callable[[], object], reruns: bool = True) -> None:
    """Do `action`, one that reruns the script (a widget's value changed), then wait until that run has ended and its
    charts are drawn; `reruns` False for an action that changes nothing (a widget set to the value it has), which
    starts no run: only its charts are waited for."""
    before = runs_finished(page)
    action()
    if reruns:
        idle(page, before)
    drawn(page)


def resized(page, width: int, height: int) -> None:
    """The window resized to `width` × `height` and every chart in sight drawn again at its new width."""
    page.set_viewport_size({"width": width, "height": height})
    drawn(page)


def opened(page, url: str) -> None:
    """`url` opened (e.g. '/?gpus=8'), its first run ended and every chart in sight drawn. The page's count starts
    at 0 with the document."""
    page.goto(url)
    runs_finished(page)  # a context made without the counter fails here, saying so
    idle(page, 0)
    drawn(page)


def tab_shown(page, name: str) -> None:
    """Tab `name` shown and drawn. Choosing another tab reruns the script (the page's tabs rerun on change); clicking
    the tab already shown changes nothing and starts no run, so only its charts are waited for."""
    tab = page.get_by_role("tab", name=name, exact=True)
    rerun(page, tab.click, reruns=tab.get_attribute("aria-selected") != "true")


# An element scrolled to has come to rest: its place in the window has not changed for three frames (a smooth
# scroll moves it every frame; an instant one has moved it already).
STILL = """selector => new Promise(done => {
  const at = () => { const r = document.querySelector(selector).getBoundingClientRect(); return `${r.x},${r.y}`; };
  let last = at(), still = 0;
  const frame = () => { const now = at(); still = now === last ? still + 1 : 0; last = now;
                        if (still >= 3) done(true); else requestAnimationFrame(frame); };
  requestAnimationFrame(frame);
})"""


def scrolled(page, selector: str) -> None:
    """Until the element `selector` (the first that matches), just scrolled into view, has come to rest."""
    page.evaluate(STILL, selector)
