"""Memory: bytes on each device after each phase of one sampled batch, and why device 0 carries more.

Two panels share one column per device. Top: a grid, one row per phase in pipeline order (the
vocabulary's own step names), each cell the device's total after that phase, darker for more, so
sixteen devices by nine phases read at a glance in a narrow chart; its number is written black or white,
whichever reads on its grey, and the hover breaks it down by kind of tensor. Bottom: the moment
device 0 is fullest, one bar per device stacked by kind (computed from tensor sizes by the engine's
memory ledger: what only device 0 holds, its parameters, gradients and optimizer state, sits at the
bottom, where the other bars have nothing), or one bar per device in its own colour as
torch.cuda.memory_allocated measured it on real GPUs. Memory is sampled for the
first and the last batch; the last may split differently. A rank out of batches before the last (rows split by
hand) holds its state while it waits at the end: its column says so (a note, its hovers). The legend of kinds
stands in two columns over the grid, as tall at every width (_legend_columns).

Every amount on the figure is in one unit, the one the fullest device fills (`byte_unit`), named in
the axis titles; hovers give each amount in its own unit (`human_bytes`).
"""
from __future__ import annotations

import math

from dpviz.analysis.batch_facts import batches_planned
import pandas as pd
import plotly.graph_objects as go

from dpviz.analysis.batch_facts import memory_batches, waiting_lanes
from dpviz.analysis.tables import memory_table, memory_totals
from dpviz.trace import Trace
from dpviz.trace.vocabulary import Vocabulary
from plotly.subplots import make_subplots

from dpviz.analysis.wording import counted, device_list, human_bytes, numbered
from dpviz.figures.byte_unit import ByteUnit, byte_unit  # noqa: F401  byte_unit read from here too
from dpviz.figures.colors import OUTLINE, THEME_TEXT, blend, device_color, device_pattern, text_color_on
from dpviz.figures.memory_lead import fullest_lead
from dpviz.figures.trace_words import backend_note, plain_label
from dpviz.figures.layout import styled, title_block_px
from dpviz.figures.legends import BOX_PX, ENTRY_GAP_PX, column_px, legend_entries
from dpviz.figures.presenting import CELL_TEXT
from dpviz.figures.sizes import (AXIS_TITLE_SIZE, BASE_TOP_PX, GAP_PX, LEGEND_SIZE, LINE_EM, MARGIN, NARROWEST_PX,
                                 TICK_SIZE)
from dpviz.figures.text_fit import SOFT_BREAK, text_px, wrap

KIND_LABELS = {
    "computed": "computed from tensor sizes (simulated devices)",
    "measured": "measured: torch.cuda.memory_allocated",
}
NAMED_LANES = 4  # up to this many columns say "GPU 3"; past it, "3" under an axis that says "GPU"
CAPTION_SIZE = 15
GRID_ROW_PX, BARS_PX = 34, 260
PANELS_GAP_PX = 56  # between the grid and the bars: the grid's column names and a little air
TICK_GAP_PX = 6  # the least room between two column names side by side
# A number in a cell: 13 px, 11 px past NAMED_LANES columns; past WRITTEN_TOTALS columns none (_cell_texts).
# Column names: 13 px, as many as fit side by side (name_step).
CELL_FONT, SMALL_CELL_FONT, TICK_FONT = 13, 11, 13
WRITTEN_TOTALS = 8  # past this many bars only device 0's total and the largest other's are written over them
SCROLLBAR_PX = 16  # a page that scrolls gives its charts this much less width than NARROWEST_PX
# More memory, a darker cell: one neutral ramp, so no amount reads as a device's colour or a kind's.
AMOUNT_SCALE = [[0.0, "#F2F2F2"], [1.0, "#3A3A3A"]]
WAITING = "waiting"  # under a named column out of batches, which holds its state at the end
WAITING_MARK = ", waiting at the end"  # a bar's hover, for a device out of batches that holds its state


def _check_memory_batch(trace: Trace, batch: int | None) -> int:
    sampled = memory_batches(trace)
    if not sampled:
        raise ValueError("this trace has no memory samples (it was recorded before dpviz measured memory)")
    if batch is None:
        return sampled[0]
    if isinstance(batch, bool) or batch not in sampled:
        names = " and ".join(f"{b:,}" for b in sampled)
        raise ValueError(f"memory was sampled for {'batches' if len(sampled) > 1 else 'batch'} {names} only, got {batch!r}")
    return batch


def prepare_memory(trace: Trace, batch: int | None = None) -> pd.DataFrame:
    """One row per (phase, device, category) with bytes held after that phase of `batch` (default: the
    first sampled batch), in pipeline order; `total` is the device's sum after the phase. A device that
    held nothing gets one row of category "" and 0 bytes, so every (phase, device) slot is present."""
    batch = _check_memory_batch(trace, batch)
    table = memory_table(trace)
    table = table[table["batch"] == batch]
    totals = memory_totals(trace)
    totals = totals[totals["batch"] == batch].rename(columns={"bytes": "total"})
    empty = totals[totals["total"] == 0].assign(category="", bytes=0)
    table = pd.concat([table, empty.drop(columns="total")], ignore_index=True)
    table = table.merge(totals[["phase", "device", "total"]], on=["phase", "device"], how="left")
    vocabulary = trace.vocabulary  # the stack's order, bottom to top, is the vocabulary's order of kinds
    stack = {c: i for i, c in enumerate(vocabulary.memory_names + (vocabulary.measured_memory, ""))}
    table["stack_index"] = [stack.get(c, len(stack)) for c in table["category"]]
    table = table.sort_values(["step_index", "device", "stack_index"], kind="stable").reset_index(drop=True)
    table["step"] = [step_label(vocabulary, p) for p in table["phase"]]
    return table[["batch", "phase", "step", "step_index", "device", "category", "bytes", "total"]]


def step_label(vocabulary: Vocabulary, phase: str) -> str:
    """The phase's name as the flow and the timeline write it (the vocabulary's label without the
    timeline's hatch hint); a phase it lacks, as recorded. An envelope the other views do not draw
    (DataParallel's "apply", parallel_apply running the replicas) is named for what it runs, the
    forward: "after apply" is the moment the flow and the timeline call the forward's end."""
    try:
        p = vocabulary.phase(phase)
    except KeyError:
        return phase
    if not p.drawn and any(q.name == "forward" for q in vocabulary.phases):
        p = vocabulary.phase("forward")
    return plain_label(p.label)


def _cell_hover(part: pd.DataFrame, lane: str, step: str, kind: str, waiting: str | None = None) -> str:
    """A cell's hover: the device's total after the step (or, `waiting` at the end, while the others run it) and,
    when computed, what it holds by kind."""
    total = int(part["total"].iloc[0])
    text = (f"{lane} after {step}: {human_bytes(total)}" if waiting is None else
            f"{lane} while the others run {step}: {human_bytes(total)},<br>{waiting}")
    if kind != "measured":
        held = part[part["bytes"] > 0]
        text += "".join(f"<br>  {c}: {human_bytes(b)}" for c, b in zip(held["category"], held["bytes"]))
    return text


def plot_memory(table: pd.DataFrame, *, vocabulary: Vocabulary, kind: str, title: str, notes: list[str], why: str | None,
                unit: ByteUnit, moment: str, waiting: dict[int, str] | None = None) -> go.Figure:
    """A grid of totals, phase by device, over stacked bars of every device at `moment` (a step's label).
    `waiting`: devices out of batches, holding their state at the end, each with the words its hovers say so in."""
    waiting = waiting or {}
    slots = table.drop_duplicates(["step_index", "device"])
    devices = sorted(int(d) for d in slots["device"].unique())
    steps = list(dict.fromkeys(slots.sort_values("step_index", kind="stable")["step"]))
    named = len(devices) <= NAMED_LANES
    column = {d: vocabulary.lane_name(d) if named else str(d) for d in devices}
    columns = [column[d] for d in devices]
    grid_px, bars_px, gap_px = max(GRID_ROW_PX * len(steps), 120), BARS_PX, PANELS_GAP_PX
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[grid_px, bars_px],
                        vertical_spacing=gap_px / (grid_px + bars_px + gap_px))

    totals = slots.pivot(index="step", columns="device", values="total").loc[steps, devices]
    hovers = {(s, d): _cell_hover(part, vocabulary.lane_name(d), s, kind, waiting.get(d))
              for (s, d), part in table.groupby(["step", "device"])}
    amounts = totals.to_numpy(dtype=float)
    fullest = float(amounts.max()) or 1.0
    fig.add_trace(go.Heatmap(
        z=amounts, x=columns, y=steps, colorscale=AMOUNT_SCALE, zmin=0, zmax=fullest, showscale=False, xgap=2, ygap=2,
        customdata=[[hovers[(s, d)] for d in devices] for s in steps],
        hovertemplate="%{customdata}<extra></extra>", name="total",
    ), row=1, col=1)
    texts = _cell_texts(totals, unit)
    if texts:
        _cell_numbers(fig, texts, amounts / fullest, columns, steps, CELL_FONT if named else SMALL_CELL_FONT)

    at = table[table["step"] == moment]
    if kind == "measured":
        part = at[at["category"] == vocabulary.measured_memory]
        fig.add_trace(go.Bar(
            x=[column[d] for d in part["device"]], y=part["bytes"].to_numpy() / unit.size, name=vocabulary.measured_memory,
            showlegend=False,
            marker=dict(color=[device_color(d) for d in part["device"]], line=dict(color=OUTLINE, width=0.6),
                        pattern=dict(fillmode="overlay", shape=[device_pattern(d) for d in part["device"]], fgcolor="white")),
            customdata=[unit.amount(b) + (WAITING_MARK if d in waiting else "") for b, d in zip(part["bytes"], part["device"])],
            hovertemplate=f"%{{x}} after {moment}: %{{customdata}}<extra></extra>"), row=2, col=1)
    else:
        for category in vocabulary.memory_names:
            part = at[(at["category"] == category) & (at["bytes"] > 0)]
            if not part.empty:
                fig.add_trace(go.Bar(
                    x=[column[d] for d in part["device"]], y=part["bytes"].to_numpy() / unit.size, name=category,
                    marker=dict(color=vocabulary.memory_kind(category).color, line=dict(color=OUTLINE, width=0.6)),
                    customdata=[human_bytes(b) + (WAITING_MARK if d in waiting else "")
                                for b, d in zip(part["bytes"], part["device"])],
                    hovertemplate=f"%{{x}} after {moment}: %{{customdata}} of {category}<extra></extra>"), row=2, col=1)
        _legend_columns(fig)
    peaks = at.drop_duplicates("device")
    if len(peaks) > WRITTEN_TOTALS:  # sixteen numbers side by side would run together: the two that matter
        rest = peaks[peaks["device"] != devices[0]]
        peaks = peaks[(peaks["device"] == devices[0]) | (peaks.index == rest["total"].idxmax())]
    fig.add_trace(go.Scatter(  # each bar's total over it, on the page's background
        x=[column[d] for d in peaks["device"]], y=peaks["total"].to_numpy() / unit.size, mode="text", showlegend=False,
        text=[unit.number(n) if n else "0" for n in peaks["total"]], textposition="top center", cliponaxis=False,
        textfont=dict(size=CELL_FONT), hoverinfo="skip", name="totals"), row=2, col=1)

    top = float(at["total"].max()) / unit.size or 1.0
    # The rows name their phases, the title beside them what their numbers count, in words where the grid is tall
    # enough for them: a lone "KiB" left a class to guess.
    fig.update_yaxes(type="category", autorange="reversed", title_text=grid_title(vocabulary.lane_noun, unit, grid_px),
                     automargin=True, row=1, col=1)
    fig.update_yaxes(range=[0, top * 1.22], **unit.axis(f"after {moment}"), row=2, col=1)
    # Columns named under both panels (a shared axis hides the grid's): "GPU 3", or past NAMED_LANES "3"
    # under an axis titled "GPU"; every one while they fit side by side, else every other one (or third).
    left = max(margin_left(steps), first_column_px(fig))  # the legend's first column stands in it too
    shown = columns[::name_step(columns, NARROWEST_PX - left - MARGIN["r"], TICK_FONT)]
    # A named column out of batches says so under its name, on the first screen whatever moves the notes away.
    device_of = {name: d for d, name in column.items()}
    texts = [f"{c}<br>{WAITING}" if named and device_of[c] in waiting else c for c in shown]
    every = dict(tickmode="array", tickvals=shown, ticktext=texts, tickangle=0, tickfont=dict(size=TICK_FONT))
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=columns, showgrid=False, showticklabels=True,
                     **every, row=1, col=1)
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=columns,
                     title_text=None if named else vocabulary.lane_noun, **every, row=2, col=1)
    fig.update_layout(barmode="stack", bargap=0.25, hovermode="closest")
    # A caption under the axis (over the bars it would hide one), from the chart's left edge to its right.
    caption = wrap(why, CAPTION_SIZE, NARROWEST_PX - MARGIN["r"]) if why else ""
    below = 45 if named else 67  # the column names and, past NAMED_LANES, the axis title "GPU"
    bottom_px = below + 8 + (caption_px(caption, CAPTION_SIZE) + 16 if why else 0)
    styled(fig, title, ["<br>".join(n for n in notes if n)], height=grid_px + bars_px + gap_px + BASE_TOP_PX + bottom_px)
    # Room for the legend's two columns, the same at every width (_legend_columns).
    top = title_block_px(fig) + GAP_PX + columns_px(fig)
    grow = max(top - fig.layout.margin.t, 0)
    fig.update_layout(margin=dict(t=fig.layout.margin.t + grow, b=bottom_px, l=left), height=fig.layout.height + grow,
                      xaxis_tickfont_size=TICK_FONT, xaxis2_tickfont_size=TICK_FONT)
    if why:
        fig.add_annotation(text=caption, x=0, y=0, xref="paper", yref="paper", xanchor="left", yanchor="top",
                           xshift=-left, yshift=-below, align="left", showarrow=False, font=dict(size=CAPTION_SIZE))
    return fig


LEGEND_TITLE = f"kind of tensor{SOFT_BREAK}(the bars):"  # over a column: in two lines, as wrap() breaks one
SECOND = "legend2"


def _legend_columns(fig: go.Figure) -> None:
    """The kinds of tensor in two columns over the grid, meeting at the plot's left edge: the first, under the
    legend's title, in the step names' margin, the second over the plot; as many rows and the same place at every
    width. One horizontal legend lays its entries out in the plot's width, which the step names' margin leaves narrow
    on a narrow chart (one entry a row at 452 px, three at 676): room kept for the narrowest chart's rows was an empty
    band over a wider chart's legend. Both on the paper, so that plotly pushes no margin for them (a legend placed
    on the container reserves the margin it stands in)."""
    kinds = [t for t in fig.data if t.type == "bar" and t.showlegend is not False]
    first = -(-len(kinds) // 2)
    for trace in kinds[first:]:
        trace.legend = SECOND
    # The theme's own ink (THEME_TEXT), not its faded grey (3.7:1 on white), as styled() gives the entries.
    ink = dict(size=LEGEND_SIZE, color=THEME_TEXT)
    column = dict(orientation="v", x=0, xref="paper", y=1, yref="paper", yanchor="bottom", traceorder="normal",
                  font=ink)
    fig.update_layout(legend=dict(column, xanchor="right", title=dict(text=LEGEND_TITLE, side="top", font=ink)),
                      **({SECOND: dict(column, xanchor="left")} if len(kinds) > first else {}))


def first_column_px(fig: go.Figure) -> int:
    """Width in pixels of the legend's first column: a swatch and its gaps, the widest entry or line of the title,
    the box (0 for a chart without one)."""
    legend = fig.layout.legend
    size = legend.font.size or LEGEND_SIZE
    words = [*legend_entries(fig), *(legend.title.text or "").split(SOFT_BREAK)]
    return math.ceil(ENTRY_GAP_PX + max(text_px(w, size) for w in words) + BOX_PX) if legend_entries(fig) else 0


def columns_px(fig: go.Figure) -> int:
    """Height in pixels of the legend's first column, the taller (its title and as many entries as the second or
    one more)."""
    legend = fig.layout.legend
    return column_px(len(legend_entries(fig)), legend.font.size or LEGEND_SIZE, legend.title.text)


def grid_title(noun: str, unit: ByteUnit, grid_px: float) -> str:
    """The grid's axis title: 'bytes held per GPU (KiB)', or 'held (KiB)' where the grid is too short for it."""
    for words in (f"bytes held per {noun}", "held"):
        title = f"{words} ({unit.name})"
        if text_px(title, AXIS_TITLE_SIZE) <= grid_px:
            return title
    return unit.name


def caption_px(text: str, size: float) -> float:
    """Height in pixels of a caption of `text`'s lines at `size` px type."""
    return (1 + text.count(SOFT_BREAK) + text.count("<br>")) * size * LINE_EM


def margin_left(steps: list[str]) -> int:
    """The left margin the grid's step names and the axis titles take, so the plot's width is known."""
    names = max(text_px(s, TICK_SIZE) for s in steps) if steps else 0
    return int(names + 2 * AXIS_TITLE_SIZE * LINE_EM + 16)


def name_step(columns: list[str], plot_px: float, size: float) -> int:
    """1 when every column's name fits side by side in `plot_px` at `size` px, else the least k for which
    every k-th one does (2: GPUs 0, 2, 4, ...)."""
    widest = max((text_px(c, size) for c in columns), default=0) + TICK_GAP_PX
    column_px = plot_px / max(len(columns), 1)
    return max(1, -int(-widest // column_px))


def amount_fill(share: float) -> str:
    """The grey of a cell holding `share` (0 to 1) of the fullest cell's amount: AMOUNT_SCALE at that point,
    mixed channel by channel as plotly mixes a colourscale's two ends."""
    (_, lightest), (_, darkest) = AMOUNT_SCALE
    return blend(darkest, min(max(share, 0.0), 1.0), lightest)


def _cell_numbers(fig: go.Figure, texts: list[list[str]], shares, columns: list[str], steps: list[str],
                  size: float) -> None:
    """Each cell's number, black or white, whichever contrasts more with its grey (text_color_on): a
    heatmap writes all its cells in one colour, and plotly's own pick (#444 or white) leaves the mid greys
    at 4.2:1; black or white gives every grey of the ramp at least 4.5:1. A text trace has a colour per
    cell; sized to its cells, presentation() leaves it so (CELL_TEXT)."""
    cells = [(c, s, texts[i][j], shares[i][j]) for i, s in enumerate(steps) for j, c in enumerate(columns)]
    fig.add_trace(go.Scatter(
        x=[c for c, _, _, _ in cells], y=[s for _, s, _, _ in cells], mode="text", text=[t for _, _, t, _ in cells],
        textfont=dict(size=size, color=[text_color_on(amount_fill(share)) for _, _, _, share in cells]),
        hoverinfo="skip", showlegend=False, name="cell totals",
        meta=CELL_TEXT,  # larger, the numbers would run together
    ), row=1, col=1)


def _cell_texts(totals: pd.DataFrame, unit: ByteUnit) -> list[list[str]] | None:
    """Each cell's total as written in the grid; None past WRITTEN_TOTALS columns, where a cell is ~22 px
    wide and even two numbers side by side (device 0's and device 1's) run together: the shade, the
    bars' totals below and the hover carry the amounts there."""
    values = totals.to_numpy()
    if values.shape[1] > WRITTEN_TOTALS:
        return None
    return [[unit.number(n) if n else "0" for n in row] for row in values]


def _why(trace: Trace, table: pd.DataFrame, unit: ByteUnit) -> str | None:
    """The chart's note, in its engine's terms; none for one lane or an empty chart."""
    if len(trace.lanes) < 2 or table["total"].max() == 0:
        return None
    return trace.spec.part("memory_why")(trace, table, unit)


def balanced_why(trace: Trace, table: pd.DataFrame, unit: ByteUnit) -> str:
    """DDP: every rank holds its own full copy of everything; say how even the ranks are at their fullest."""
    vocabulary = trace.vocabulary
    peaks = table.groupby("device")["total"].max()
    most, least = int(peaks.max()), int(peaks.min())
    at = table.loc[table["total"].idxmax()]
    lead = (f"<b>Balanced: at its fullest (after {at['step']}) every {vocabulary.lane_noun} holds {unit.amount(most)}.</b>"
            if most == least else fullest_lead(trace, table, unit))
    held = table[table["bytes"] > 0].groupby("category")["device"].nunique()
    everywhere = [c for c in vocabulary.memory_names if held.get(c, 0) == len(trace.lanes)]
    kept = f"Every {vocabulary.lane_noun} holds its own {', '.join(everywhere)}" if everywhere else ""
    return lead + (f"<br>{kept}:<br>no output is gathered onto one {vocabulary.lane_noun}, no gradient summed onto one."
                   if kept else "")


def memory_figure(trace: Trace, batch: int | None = None) -> go.Figure:
    """Memory per device after each phase of `batch` (default: the first sampled batch; the last batch
    is sampled too and may split differently), stacked by kind (computed) or as measured."""
    batch = _check_memory_batch(trace, batch)
    table = prepare_memory(trace, batch)
    kind = trace.memory_kind
    step = trace.spec.unit
    title = f"Memory per {trace.vocabulary.lane_noun} after each phase of {numbered(batch, batches_planned(trace), step)}"
    first = trace.lanes[0].id
    mine = table.loc[table["device"] == first, "total"].max()
    if len(trace.lanes) > 1 and mine > table.loc[table["device"] != first, "total"].max():
        title += ":<br>" + trace.vocabulary.word("carries_most", lane=trace.vocabulary.lane_name(first))
    label = trace.vocabulary.words.get("computed_memory", KIND_LABELS[kind]) if kind == "computed" else KIND_LABELS.get(kind, kind)
    notes = [label, backend_note(trace)]
    sampled = memory_batches(trace)
    if len(sampled) > 1:
        notes.append(f"sampled: {plural_unit(step)} {' and '.join(f'{b + 1:,}' for b in sampled)}")
    waiting = waiting_lanes(trace, batch)
    notes += waiting_notes(trace, waiting)
    unit = byte_unit(float(table["total"].max()))
    words = {lane: f"waiting at the end: out of batches after {step} {counted(last)}"
             for lane, last in waiting.items()}
    return plot_memory(table, vocabulary=trace.vocabulary, kind=kind, title=title, notes=notes,
                       why=_why(trace, table, unit), unit=unit, moment=fullest_step(trace, table), waiting=words)


def plural_unit(unit: str) -> str:
    """'steps', 'batches': the unit of work, several of them."""
    return "steps" if unit.endswith("p") else f"{unit}es"


def waiting_notes(trace: Trace, waiting: dict[int, int]) -> list[str]:
    """One line per last step for the lanes whose DataLoader ran out of batches and that wait at the end holding their
    state: their columns are what they hold while the others still run, never 0."""
    noun, first, unit = trace.vocabulary.lane_noun, trace.vocabulary.first_lane, trace.spec.unit
    lines = []
    for last in sorted(set(waiting.values())):
        lanes = [lane for lane, ran in waiting.items() if ran == last]
        after = f"after {unit} {counted(last)}" if last >= 0 else "from the start"
        one = len(lanes) == 1
        lines.append(f"{device_list([lane + first for lane in lanes], noun)}, out of batches {after}, "
                     f"{'waits' if one else 'wait'} at the end holding {'its' if one else 'their'} state")
    return lines


def fullest_step(trace: Trace, table: pd.DataFrame) -> str:
    """The step after which device_ids[0] holds the most (the first such), or any lane where no lane leads."""
    mine = table[table["device"] == trace.lanes[0].id] if trace.vocabulary.lead_lane else table
    return str(mine.loc[mine["total"].idxmax(), "step"])
