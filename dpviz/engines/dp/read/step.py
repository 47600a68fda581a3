"""Step through: one batch's flow, one animation frame per step DataParallel takes (play button and slider).

    step_figure(trace, batch=3)

The frames follow DataParallel's order: scatter, replicate, the forwards, gather and, training, loss,
backward, the gradients' sum and the step. Each frame lights up its step on the flow (flow_draw.py:
one row per GPU, labelled with the rows it got), fades the steps before it and hides those after,
and its title says in plain words what the step does and on which devices (step_words.py). A frame
changes only the traces' opacity, so a 16-GPU training batch stays a few kilobytes of frames.
"""
from __future__ import annotations

from dpviz.analysis.batch_facts import batches_planned
import pandas as pd
import plotly.graph_objects as go

from dpviz.trace import Trace
from dpviz.engines.dp.read.flow import ONE_LINE_LANES, flow_figure
from dpviz.engines.dp.read.flow_draw import MARGIN_B, step_name
from dpviz.engines.dp.read.flow_links import flow_steps
from dpviz.engines.dp.read.step_words import step_story
from dpviz.analysis.wording import numbered
from dpviz.figures.arguments import check_batch
from dpviz.figures.layout import title_block_px
from dpviz.figures.sizes import GAP_PX, SUBTITLE_SIZE, TITLE_SIZE
from dpviz.figures.text_fit import line_count, wrap

FRAME_MS = 1600  # long enough to read each frame's title while playing
EARLIER = 0.25  # the opacity of the steps already taken
# Pixel rows: over the lanes, under the title, play/pause then the slider (its current value, the rail, the
# step numbers); under the lanes, the steps' names (upright on a narrow chart). The height is fixed, so pixels are known.
AXIS_PX = MARGIN_B
BUTTONS_PX = 36  # a row of buttons at the house font size (33 px measured)
GAP_PX_CONTROLS = 10
CURRENT_OFFSET_PX = 8  # between the slider's current value and its rail
SLIDER_PX = 80  # current value, rail, step numbers (74 px measured)
CONTROLS_PX = BUTTONS_PX + GAP_PX_CONTROLS + SLIDER_PX + GAP_PX_CONTROLS  # over the lanes, under the title


def prepare_steps(trace: Trace, batch: int) -> pd.DataFrame:
    """One row per frame, in DataParallel's order: the step, its devices, and what happens, in words."""
    check_batch(trace, batch)
    steps = flow_steps(trace, batch)
    records = []
    for number, step in enumerate(steps, start=1):
        devices, words = step_story(trace, batch, step)
        records.append((number, step, step_name(trace, step), devices, words))
    return pd.DataFrame.from_records(records, columns=["frame", "step", "name", "devices", "words"])


# Past this many GPUs (flow.ONE_LINE_LANES) a frame's title takes the subtitle's type and runs on from its step's name:
# a step's sentence naming sixteen GPUs took five lines of the title's, and pushed GPUs 8-15 under a projector's
# first screen.
STORY_SIZE = SUBTITLE_SIZE


def _many(trace: Trace) -> bool:
    return len(trace.lanes) >= ONE_LINE_LANES


def _title(trace: Trace, batch: int, row, frames: int) -> str:
    head = f"{numbered(batch, batches_planned(trace), 'Batch')} · step {row.frame} of {frames}: {row.name}"
    # Soft breaks (text_fit.wrap), so presentation() can wrap the words again at its larger size.
    if _many(trace):
        return wrap(f"{head} · {row.words}", STORY_SIZE)
    return f"{head}<br>{wrap(row.words[0].upper() + row.words[1:], TITLE_SIZE)}"


def _first_seen(fig: go.Figure, order: dict[str, int]) -> list[int]:
    """The frame each trace first shows in: its own step's, or for a node the first link's that reaches
    it (a forward's node shows with the scatter band that lands on it)."""
    reached: dict[int, int] = {}
    for t in fig.data:
        if t.meta["kind"] == "link":
            for node in (t.meta["source"], t.meta["target"]):
                reached[node] = min(reached.get(node, len(order)), order[t.meta["step"]])
    return [min(order[t.meta["step"]], reached.get(t.meta.get("node", -1), len(order))) for t in fig.data]


def plot_steps(fig: go.Figure, table: pd.DataFrame, titles: list[str]) -> go.Figure:
    """Turn a flow figure into one animation frame per row of `table`, with play/pause and a slider."""
    order = {step: i for i, step in enumerate(table["step"])}
    seen = _first_seen(fig, order)
    own = [order[t.meta["step"]] for t in fig.data]
    frames = []
    for k, title in enumerate(titles):
        opacity = [1.0 if k in (own[i], seen[i]) else EARLIER if seen[i] < k else 0.0 for i in range(len(fig.data))]
        frames.append(go.Frame(name=str(k + 1), data=[go.Scatter(opacity=o) for o in opacity],
                               traces=list(range(len(fig.data))), layout=go.Layout(title=dict(text=title))))
    for trace, o in zip(fig.data, frames[0].data):
        trace.opacity = o.opacity
    return animated(fig, frames, titles, "step ")


def animated(fig: go.Figure, frames: list[go.Frame], titles: list[str], prefix: str) -> go.Figure:
    """`fig` with `frames`, a play/pause pair and a slider over them ('step 3', 'phase 2'), placed under the
    title: what every Step through shares."""
    fig.frames = frames
    play = dict(frame=dict(duration=FRAME_MS, redraw=True), transition=dict(duration=0), fromcurrent=True, mode="immediate")
    still = dict(frame=dict(duration=0, redraw=True), transition=dict(duration=0), mode="immediate")
    fig.update_layout(
        updatemenus=[dict(type="buttons", direction="left", x=0, xanchor="left", yanchor="top", showactive=False,
                          pad=dict(t=0, b=0, l=0, r=0),
                          buttons=[dict(label="▶ play", method="animate", args=[None, play]),
                                   dict(label="❚❚ pause", method="animate", args=[[None], still])])],
        sliders=[dict(active=0, x=0, len=1, xanchor="left", yanchor="top", pad=dict(t=0, b=0, l=0, r=0),
                      currentvalue=dict(prefix=prefix, offset=CURRENT_OFFSET_PX),
                      steps=[dict(label=f.name, method="animate", args=[[f.name], still]) for f in frames])],
    )
    return _place(fig, titles)


def _place(fig: go.Figure, titles: list[str]) -> go.Figure:
    """Room above the lanes for the longest frame's title, then the controls: the play/pause row and
    the slider (its current value on top), between the title and the lanes, so a projector's first screen
    has them beside the chart's top rather than under a 16-GPU flow. Rows placed in pixels never meet."""
    layout = fig.layout
    plot_px = layout.height - layout.margin.t - layout.margin.b
    # The title block of the frame whose title takes the most lines: no frame's title meets the controls.
    longest = max(titles, key=line_count)
    layout.title.text = longest
    title_px = title_block_px(fig) + GAP_PX
    top = title_px + CONTROLS_PX
    height = int(top + AXIS_PX + plot_px)
    fig.update_layout(height=height, margin=dict(t=top, b=AXIS_PX), title_text=titles[0])

    def above(px: float) -> float:  # paper y of a point `px` pixels over the plot's top edge
        return 1 + px / plot_px

    layout.updatemenus[0].y = above(CONTROLS_PX)
    layout.sliders[0].y = above(CONTROLS_PX - BUTTONS_PX - GAP_PX_CONTROLS)
    return fig


def step_figure(trace: Trace, batch: int = 0) -> go.Figure:
    """`batch`'s flow, animated one step at a time in DataParallel's order."""
    table = prepare_steps(trace, batch)
    fig = flow_figure(trace, batch)
    fig.layout.title.font.size = STORY_SIZE if _many(trace) else TITLE_SIZE
    titles = [_title(trace, batch, row, len(table)) for row in table.itertuples()]
    return plot_steps(fig, table, titles)
