"""DistributedDataParallel traces in every view open to them: ranks, per-rank rows, padding, bucket all-reduces.

The traces are real runs (tests/ddp_traces.py), recorded once per session. What each figure shows is
checked against the trace itself and against DistributedSampler's arithmetic, computed here.
"""
import re
from collections import Counter

import numpy as np
import pytest

from dpviz import RunConfig
from dpviz.figures import MAX_MARKS, count_marks, html_report, memory_figure, sample_map_figure, split_figure, timeline_figure
from dpviz.figures.colors import device_color
from dpviz.engines.ddp.read.sample_map import prepare_sample_map_ddp
from dpviz.engines.ddp.read.split import prepare_split_ddp
from dpviz.engines.ddp.read.timeline import REDUCE_TOP, WAIT, prepare_timeline_ddp, window_size
from dpviz.figures.views import VIEWS
from dpviz.analysis.batch_facts import memory_batches
from dpviz.engines.ddp.read.tables import bucket_layout
from ddp_traces import CONFIGS, ddp_trace, record_config
from dpviz.figures.text_fit import unwrap  # titles read without the line breaks styled() wraps them with

NAMES = list(CONFIGS)


def _padding(config) -> int:
    """Rows DistributedSampler repeats: ceil(N / W) * W - N."""
    return -(-config.data_size // config.gpus) * config.gpus - config.data_size


def _twice(trace) -> list[int]:
    """Dataset rows loaded twice over the run (one epoch), counted straight from the steps' rows."""
    return sorted(row for row, n in Counter(i for b in trace.batches for i in b.sample_ids).items() if n > 1)


@pytest.mark.parametrize("name", NAMES)
def test_every_view_open_to_ddp_draws_it_in_ranks_never_gpus(name):
    trace = ddp_trace(name)
    drawn = 0
    for view in VIEWS:
        if "ddp" not in view.engines:
            continue
        if view.control == "sampled":
            shown = [view.build(trace, b) for b in view.sampled(trace)]
        elif view.control in ("batch", "window"):
            shown = [view.build(trace, 0)]
        else:
            shown = [view.build(trace)]
        for fig in shown:
            if isinstance(fig, str):
                continue
            # the note says none was used; numbers travel as base64 ("bdata"), where any three letters may turn up
            text = re.sub(r'"bdata":"[^"]*"', "", fig.to_json()).replace("no GPU", "")
            assert "GPU" not in text, (view.key, text[text.find("GPU") - 80:text.find("GPU") + 40])  # a CPU rank is a process
            assert "rank 0" in text, view.key
            assert count_marks(fig) <= MAX_MARKS
            drawn += 1
    assert drawn >= 4
    assert {v.key for v in VIEWS if "ddp" in v.engines} >= {"split", "timeline", "samples", "memory", "log"}
    assert {v.key for v in VIEWS if "ddp" not in v.engines} >= {"step", "inputs"}  # DataParallel's own


@pytest.mark.parametrize("name", NAMES)
def test_split_bars_are_each_ranks_rows_and_the_padding_is_marked(name):
    trace = ddp_trace(name)
    table = prepare_split_ddp(trace)
    forwards = {(s.batch, s.lane): s.rows for s in trace.spans if s.phase == "forward"}
    for row in table.itertuples():
        assert row.rows == forwards[(row.first_batch, row.device)]
    assert table["repeated"].sum() == _padding(trace.config) == len(_twice(trace))
    fig = split_figure(trace)
    for rank in range(trace.config.gpus):
        segments = [t for t in fig.data if t.type == "bar" and t.name == f"rank {rank}"]
        total = Counter()
        for t in segments:
            total.update(dict(zip(t.x, t.y)))
        assert [total[str(b.index + 1)] for b in trace.batches] == [forwards[(b.index, rank)] for b in trace.batches]
    hatched = [t for t in fig.data if t.type == "bar" and t.marker.pattern.shape == "x" and t.x[0] is not None]
    assert sum(sum(t.y) for t in hatched) == _padding(trace.config)
    if _padding(trace.config):
        assert f"{_padding(trace.config)} row" in unwrap(fig.layout.title.text) and "loaded again" in unwrap(fig.layout.title.text)


def test_the_padding_rows_are_the_first_of_the_samplers_list_and_come_last():
    trace = ddp_trace("four_train")  # 90 rows, 4 ranks: the list is padded with its first 2 rows
    table = prepare_split_ddp(trace)
    last = len(trace.batches) - 1
    assert table.loc[table["repeated"] > 0, "first_batch"].tolist() == [last, last]
    assert table.loc[table["repeated"] > 0, "device"].tolist() == [2, 3]  # L[88], L[89] go to ranks 0-1; L[90:] to 2-3
    first = trace.batches[0]
    list_start = [first.sample_ids[s.row_offset] for s in sorted(trace.replicas(0), key=lambda s: s.lane)][:2]
    assert _twice(trace) == sorted(list_start)  # the sampler's L[0] and L[1], rank 0's and rank 1's first rows


@pytest.mark.parametrize("name", ["four_train", "two_train", "three_ordered"])
def test_timeline_has_an_allreduce_bar_per_bucket_per_rank_per_step_beside_its_backward(name):
    trace = ddp_trace(name)
    table = prepare_timeline_ddp(trace, 0, len(trace.batches) - 1)
    reduces = table[table["phase"] == "allreduce"]
    for batch in trace.batches:
        buckets = {b["index"] for b in bucket_layout(trace, batch.index)}
        assert buckets
        for rank in range(trace.config.gpus):
            mine = reduces[(reduces["batch"] == batch.index) & (reduces["device"] == rank)]
            assert set(mine["group"]) == buckets and len(mine) == len(buckets)
            (back,) = table[(table["phase"] == "backward") & (table["batch"] == batch.index) & (table["device"] == rank)].itertuples()
            for bar in mine.itertuples():
                assert bar.start_ms < back.end_ms and bar.end_ms > back.start_ms  # overlaps its backward
    assert len(table[table["phase"] == "allreduce"]) == sum(s.phase == "allreduce" for s in trace.spans)
    assert max(len(bucket_layout(trace, b.index)) for b in trace.batches) > 1  # the rebuild made several buckets


def test_timeline_draws_allreduces_on_a_thin_row_under_the_rank_overlapping_its_backward_bar():
    trace = ddp_trace("four_train")
    fig = timeline_figure(trace)
    (reduce,) = [t for t in fig.data if t.name == "all-reduce"]
    (backward,) = [t for t in fig.data if t.name == "backward (×)" and t.x[0] is not None]
    back = {}
    for y, base, x, data in zip(backward.y, backward.base, backward.x, backward.customdata):
        back[(round(y + 0.12), int(data[1]))] = (base, base + x)
    for y, base, x, data in zip(reduce.y, reduce.base, reduce.x, reduce.customdata):
        lane = round(y - REDUCE_TOP)
        assert lane + REDUCE_TOP < y < lane + 0.5  # under the rank's own row, inside its lane
        start, end = back[(lane, int(data[1]))]
        assert base < end and base + x > start
    step1 = bucket_layout(trace, 1)
    hovers = " ".join(str(d[0]) for d in reduce.customdata)
    for bucket in step1:
        assert f"bucket {bucket['index']} (torch's index; {len(step1)} in all)" in hovers
        assert all(p in hovers for p in bucket["params"][:6])
    assert f"rank 3: all-reduce of bucket" in hovers
    assert any(t.name == "waiting for all-reduce" for t in fig.data)
    assert "one lane per rank" in unwrap(fig.layout.title.text)
    assert fig.layout.yaxis.ticktext == tuple(f"rank {r}" for r in range(4))
    assert "4 ranks on the CPU (gloo)" in unwrap(fig.layout.title.subtitle.text)


def test_timeline_of_accumulation_names_the_no_sync_steps_and_draws_no_allreduce_in_them():
    trace = ddp_trace("two_accumulate")
    fig = timeline_figure(trace)
    names = [a.text for a in fig.layout.annotations if a.name == "step mark"]
    # Counted from 1. How crowded the names are depends on the measured times: a crowded run names the steps
    # after the first by number alone or leaves one out (step_marks), never a wrong one.
    assert names[0] == "step 1: no_sync"
    shown = [name.removeprefix("step ") for name in names]
    assert shown == [n for n in ["1: no_sync", "2", "3: no_sync", "4"] if n in shown]
    table = prepare_timeline_ddp(trace, 0, 3)
    assert sorted(set(table.loc[table["phase"] == "allreduce", "batch"])) == [1, 3]
    assert set(table.loc[table["phase"] == WAIT, "batch"]) <= {1, 3}


def test_timeline_of_a_forward_only_run_has_no_allreduce_row_and_says_why():
    fig = timeline_figure(ddp_trace("four_forward"))
    assert not any(t.name == "all-reduce" for t in fig.data)
    assert "no all-reduce in these steps: forward only" in unwrap(fig.layout.title.subtitle.text)
    assert window_size(ddp_trace("four_forward")) >= len(ddp_trace("four_forward").batches)


def test_sample_map_lays_each_step_out_in_the_samplers_strided_order():
    trace = ddp_trace("three_ordered")  # rows 0..19 in order, 3 ranks: rank r takes r, r + 3, ...
    table, repeats = prepare_sample_map_ddp(trace)
    step0 = table[table["batch"] == 0].sort_values("position")
    assert step0["sample"].tolist() == list(range(12))  # the sampler's list, in order
    assert (step0["device"] == step0["position"] % 3).all()  # dealt out in strides
    step1 = table[table["batch"] == 1].sort_values("position")
    assert step1["sample"].tolist() == list(range(12, 20)) + [0]  # padded with the list's first row
    assert repeats == [(1, 8)] and step1.iloc[-1]["device"] == 2
    fig = sample_map_figure(trace)
    assert "dealt out in strides" in unwrap(fig.layout.annotations[1].text)
    # The rings around the marks (each dark or white against its mark); the legend's grey ring has no points.
    top, bottom = [t for t in fig.data if t.name == "loaded again (padding)" and t.x[0] is not None]
    assert (list(top.x), list(top.y)) == ([0], [2])  # dataset row 0, in step 2 (index 1: steps read from 1)
    assert (list(bottom.x), list(bottom.y)) == ([8], [2])  # the step's place 8, rank 2's third row
    assert [t.name for t in fig.data if t.type == "scatter" and t.mode == "markers" and (t.name or "").startswith("rank")] == ["rank 0", "rank 1", "rank 2"]


def test_sample_map_of_dataparallel_still_shows_contiguous_slices():
    from figure_traces import recorded

    fig = sample_map_figure(recorded(gpus=3))
    assert unwrap(fig.layout.annotations[1].text).startswith("Inside each batch: one contiguous slice per GPU")
    assert not any(t.name == "loaded again (padding)" for t in fig.data)


@pytest.mark.parametrize("name", ["four_train", "two_accumulate"])
def test_memory_per_rank_is_balanced_and_says_so(name):
    trace = ddp_trace(name)
    for batch in memory_batches(trace):
        fig = memory_figure(trace, batch)
        assert unwrap(fig.layout.title.text).startswith(f"Memory per rank after each phase of step {batch + 1} of ")  # from 1
        (caption,) = [a.text for a in fig.layout.annotations]
        assert caption.startswith("<b>Balanced:") and "no output is gathered onto one rank" in caption
        totals = {}
        for m in trace.memory:
            if m.batch == batch:
                totals[(m.phase, m.lane)] = totals.get((m.phase, m.lane), 0) + m.bytes
        for phase in {p for p, _ in totals}:
            assert len({totals[(phase, r)] for r in range(trace.config.gpus)}) == 1  # what "balanced" claims


def test_report_of_a_ddp_run_has_its_views_in_its_words_and_not_dataparallels():
    trace = ddp_trace("four_train")
    page = html_report(trace)
    assert "DistributedDataParallel run: 90 rows, a global batch of 32, on 4 ranks (one process each)" in page
    for heading in ("Split per step", "Timeline", "Sample map", "Memory per rank", "Tutorial log", "Key figures"):
        assert f"<h2>{heading}</h2>" in page
    assert "What each GPU received" not in page and "Step through" not in page
    assert "real processes: 4 ranks on the CPU (gloo), no GPU" in page


def test_lane_colours_are_the_same_in_split_and_timeline():
    trace = ddp_trace("two_train")
    split = split_figure(trace)
    colours = {t.name: t.marker.color for t in split.data if t.type == "bar" and t.name.startswith("rank")}
    assert colours == {"rank 0": device_color(0), "rank 1": device_color(1)}
    timeline = timeline_figure(trace)
    (forward,) = [t for t in timeline.data if t.name == "forward" and t.x[0] is not None]
    lanes = np.round(np.asarray(forward.y) + 0.12).astype(int)
    assert [device_color(d) for d in lanes] == list(forward.marker.color)


def test_a_files_parameter_names_and_errors_reach_the_figures_as_text():
    import dataclasses

    from dpviz.trace import Failure

    trace = ddp_trace("two_train")
    evil = "<b>x</b><a href='http://e.example'>y</a>"
    layouts = [{**lay, "buckets": [{**b, "params": [evil] + b["params"][1:]} for b in lay["buckets"]]}
               for lay in trace.facts["ddp"]["buckets"]]
    facts = {**trace.facts, "ddp": {**trace.facts["ddp"], "buckets": layouts}}
    failed = dataclasses.replace(trace, facts=facts, failure=Failure(batch=2, type="RuntimeError", message=evil, replica=1))
    timeline, split = timeline_figure(failed), split_figure(failed)
    hovers = " ".join(str(d[0]) for t in timeline.data if t.name == "all-reduce" for d in t.customdata)
    assert "&lt;b&gt;x&lt;/b&gt;&lt;a href='http://e.example'&gt;y&lt;/a&gt;" in hovers and evil not in hovers
    for fig in (timeline, split):
        subtitle = unwrap(fig.layout.title.subtitle.text)
        assert "failed: RuntimeError: &lt;b&gt;x&lt;/b&gt;" in subtitle and "<a href" not in subtitle
    assert "step 3 failed: RuntimeError" in unwrap(timeline.layout.title.subtitle.text)  # step index 2, from 1
    assert "step 3 failed" in unwrap(split.layout.title.subtitle.text)  # index 2, numbered from 1


def test_the_split_says_where_a_rank_gets_its_rows():
    sampled = split_figure(ddp_trace("three_ordered"))
    assert "its DistributedSampler shard" in unwrap(sampled.layout.title.subtitle.text)
    by_hand = split_figure(record_config(RunConfig(engine="ddp", gpus=3, data_size=10, batch_size=3, shuffle=False,
                                                   uneven=True, join=True)))
    text = unwrap(by_hand.layout.title.subtitle.text)
    assert "split by hand (no DistributedSampler)" in text and "DistributedSampler shard" not in text


def _drawn(fig, name: str) -> list[tuple[int, int, float, float]]:
    """(rank, step, start, end) in ms of each bar of the trace `name`: where it is drawn, as long as measured."""
    bars = []
    for t in fig.data:
        if t.name == name and t.type == "bar" and t.x[0] is not None:
            bars += [(round(y), int(d[1]), float(base), float(base) + float(d[3]))
                     for y, base, d in zip(t.y, t.base, t.customdata)]
    return bars


@pytest.mark.parametrize("name", ["four_train", "default"])
def test_the_all_reduce_share_the_timeline_states_is_the_overlap_of_its_drawn_bars(name):
    from dpviz.analysis.summary import key_figures
    from dpviz.engines.ddp.read.tables import computing_overlap
    from dpviz.engines.ddp.read.timeline import WAIT_LABEL

    trace = ddp_trace(name) if name != "default" else record_config(RunConfig(engine="ddp", gpus=4, train=True))
    fig = timeline_figure(trace)
    label = trace.vocabulary.phase
    waits = {(rank, step): start for rank, step, start, _ in _drawn(fig, WAIT_LABEL)}
    # The bar's solid part: from its start to where the pale wait begins (its end when there is none).
    computing = {(rank, step): (start, waits.get((rank, step), end))
                 for rank, step, start, end in _drawn(fig, label("backward").label)}
    reduces = _drawn(fig, label("allreduce").label)
    overlap = sum(max(0.0, min(end, computing[(r, s)][1]) - max(start, computing[(r, s)][0]))
                  for r, s, start, end in reduces)
    total = sum(end - start for _, _, start, end in reduces)
    assert (overlap / 1e3, total / 1e3) == pytest.approx(computing_overlap(trace), abs=1e-9)
    note = unwrap(fig.layout.title.subtitle.text)
    assert f"all-reduce during backward's compute: {overlap:,.2f} of {total:,.2f} ms ({overlap / total:.0%})" in note
    assert key_figures(trace)["all-reduce during backward's compute"] == f"{overlap / total:.0%}"
    if name == "four_train":  # several buckets from step 2 on: some all-reduce ran while backward computed
        assert overlap > 0
    else:  # one bucket: it launches once backward has made every gradient; the bar under it is its wait
        assert overlap == 0 and len(waits) == 4 * len(trace.batches)


@pytest.mark.parametrize("name", ["four_train", "two_accumulate", "default"])
def test_step_names_never_meet_on_the_narrowest_chart_in_either_look(name):
    from dpviz.figures.presenting import presentation
    from dpviz.figures.sizes import MARGIN, NARROWEST_PX
    from dpviz.figures.text_fit import text_px

    trace = ddp_trace(name) if name != "default" else record_config(RunConfig(engine="ddp", gpus=4, train=True))
    for fig, scale in ((timeline_figure(trace), 1.0), (presentation(timeline_figure(trace)), 1.35)):
        marks = [a for a in fig.layout.annotations if a.name == "step mark"]
        spans = [(start, end) for t in fig.data if t.type == "bar" and t.x[0] is not None
                 for start, end in zip(t.base, [b + x for b, x in zip(t.base, t.x)])]
        low, high = fig.layout.xaxis.range or (min(s for s, _ in spans), max(e for _, e in spans))  # as it opens
        px_per_ms = (NARROWEST_PX - (MARGIN["l"] + MARGIN["r"]) * scale) / (high - low)
        rows: dict[int, list] = {}
        for a in marks:
            rows.setdefault(a.yshift or 0, []).append(a)
        for row in rows.values():
            row.sort(key=lambda a: a.x)
            for left, right in zip(row, row[1:]):
                assert (right.x - left.x) * px_per_ms >= text_px(left.text, left.font.size), (left.text, right.text)
        assert len(fig.layout.shapes) >= len(trace.batches)  # every step keeps its dotted line
    if name == "default":  # a 1-row last step, close to the one before: every step still named, from 1
        assert marks[0].text == "step 1" and [int(a.text.split()[-1]) for a in marks] == [1, 2, 3, 4]


def _node_boxes(fig) -> list[tuple[float, float, float]]:
    """(x, top, bottom) of each Sankey node in pixels from the plot's top, as plotly places a fixed node: its
    centre at y × the plot's height, its height its value × d3-sankey's scale (the scale that fits the
    fullest column, with the node pad between its nodes)."""
    (sankey,) = fig.data
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    inflow, outflow = Counter(), Counter()
    for s, t, v in zip(sankey.link.source, sankey.link.target, sankey.link.value):
        outflow[s] += v
        inflow[t] += v
    values = [max(inflow[i], outflow[i]) for i in range(len(sankey.node.x))]
    columns: dict[float, list[int]] = {}
    for i, x in enumerate(sankey.node.x):
        columns.setdefault(x, []).append(i)
    pad = min(sankey.node.pad, plot_px / max(1, max(len(c) for c in columns.values()) - 1))
    scale = min((plot_px - (len(c) - 1) * pad) / sum(values[i] for i in c) for c in columns.values())
    return [(x, y * plot_px - values[i] * scale / 2, y * plot_px + values[i] * scale / 2)
            for i, (x, y) in enumerate(zip(sankey.node.x, sankey.node.y))]


FLOWS = {"four_train": 0, "two_train": 2, "four_forward": 1, "default": 0, "default_last": 3}


@pytest.mark.parametrize("name", list(FLOWS))
def test_ddp_flow_names_its_columns_over_every_node_in_either_look(name):
    from dpviz.engines.ddp.read.flow import flow_ddp_figure
    from dpviz.figures.presenting import presentation

    trace = record_config(RunConfig(engine="ddp", gpus=4, train=True)) if name.startswith("default") else ddp_trace(name)
    for fig in (flow_ddp_figure(trace, FLOWS[name]), presentation(flow_ddp_figure(trace, FLOWS[name]))):
        boxes = _node_boxes(fig)
        # Every node inside the plot (to within a pixel): none reaches up into the columns' names.
        assert all(top >= -1 and bottom <= fig.layout.height - fig.layout.margin.t - fig.layout.margin.b + 1
                   for _, top, bottom in boxes), boxes
        names = [a for a in fig.layout.annotations if a.name == "column"]
        assert len(names) == (5 if trace.config.train else 3)
        for a in names:  # over the plot's top edge, with a gap, and the room over the plot holds them
            assert a.y == 1 and a.yanchor == "bottom" and a.yshift > 0
            lines = a.text.count("<br>") + 1
            assert fig.layout.margin.t >= a.yshift + lines * a.font.size * 1.2 + 20  # and the title block above
        assert unwrap(fig.layout.title.text).startswith(f"Step {FLOWS[name] + 1} of {len(trace.batches)}:")


@pytest.mark.parametrize("name", ["four_train", "four_forward"])
def test_ddp_flow_column_names_never_meet_on_the_narrowest_chart_or_presenting(name):
    """The columns' names, each as wide as its widest line, keep apart on an 800 px window's chart (about 440 px)
    and presenting at 1024 px (about 620, type and margins 1.35 times): "all-reduce" met "optimizer" on both."""
    from dpviz.engines.ddp.read.flow import flow_ddp_figure
    from dpviz.figures.presenting import presentation
    from dpviz.figures.text_fit import text_px

    fig = flow_ddp_figure(ddp_trace(name), 0)
    for chart, look in ((440, fig), (620, presentation(fig))):
        plot = chart - look.layout.margin.l - look.layout.margin.r
        boxes = []
        for a in (a for a in look.layout.annotations if a.name == "column"):
            width = max(text_px(line, a.font.size) for line in a.text.split("<br>"))
            left = a.x * plot - {"left": 0, "center": width / 2, "right": width}[a.xanchor]
            boxes.append((left, left + width, a.text))
        boxes.sort()
        for (_, right, one), (left, _, other) in zip(boxes, boxes[1:]):
            assert left - right >= 4, (chart, one, other)
        assert boxes[0][0] >= -look.layout.margin.l and boxes[-1][1] <= plot + look.layout.margin.r  # in the chart


@pytest.mark.parametrize("name", ["four_train", "three_ordered"])
def test_ddp_flow_names_each_rank_on_its_band_in_a_readable_colour(name):
    from dpviz.figures.colors import contrast_ratio, device_color
    from dpviz.engines.ddp.read.flow import THICKNESS_PX, flow_ddp_figure

    trace = ddp_trace(name)
    fig = flow_ddp_figure(trace, 0)
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    tags = [a for a in fig.layout.annotations if a.name == "rank tag"]
    boxes = _node_boxes(fig)[1:1 + len(tags)]  # the ranks' own rows, after the dataset
    assert [a.text.split("<br>")[0] for a in tags] == [f"rank {r}" for r in range(len(trace.lanes))]
    for rank, (a, (x, top, bottom)) in enumerate(zip(tags, boxes)):
        assert a.bgcolor == device_color(rank)  # on its band, in a tag of the rank's own colour
        assert contrast_ratio(a.font.color, a.bgcolor) >= 4.5, (a.text, a.font.color, a.bgcolor)
        assert top <= (1 - a.y) * plot_px <= bottom and a.x == x and a.xshift >= THICKNESS_PX / 2  # beside its node
    assert all(not label for label in fig.data[0].node.label)  # plotly's own labels, in the theme's ink, are off


def _late(trace, seconds: float):
    """`trace` with every span after the ranks' setup `seconds` later: an idle stretch before step 1, as a busy
    machine gives the page (a rank scheduled late, DDP()'s broadcast waiting on it)."""
    import dataclasses
    from dpviz.engines.ddp.read.timeline import setup_phases

    setup = setup_phases(trace.vocabulary)
    return dataclasses.replace(trace, spans=[s if s.phase in setup else dataclasses.replace(
        s, start=s.start + seconds, end=s.end + seconds) for s in trace.spans])


@pytest.mark.parametrize("name", ["ddp", "zero1"])
def test_the_timeline_spends_its_width_on_the_steps_not_on_the_setup_before_them(name):
    """At the page's defaults (forward only) a step takes a tenth of a ms, and what every rank does once before step 1
    (DDP()'s broadcast, the wait for its first rows) as long as the four together, or a second on a busy machine:
    opened on all of it, the steps had a strip of the chart. As recorded, and with an idle second more before step 1,
    the steps take most of the range the chart opens on, and its note says what it left out."""
    from dpviz.engines import engine
    from dpviz.engines.ddp.read.timeline import SETUP_SHARE, first_loads, setup_phases

    recorded_run = engine(name).record(RunConfig(engine=name))
    # Idle before step 1 for 50 times as long as the steps took: whatever this machine's speed, the steps are then
    # under 1/50 of the whole run.
    ran = prepare_timeline_ddp(recorded_run, 0, len(recorded_run.batches) - 1)
    ran = ran[~ran["phase"].isin(setup_phases(recorded_run.vocabulary))]
    idle_s = 50 * (ran["end_ms"].max() - ran["start_ms"].min()) / 1000
    for trace in (recorded_run, _late(recorded_run, idle_s)):
        fig = timeline_figure(trace)
        table = prepare_timeline_ddp(trace, 0, len(trace.batches) - 1)
        # Each rank's first load (its wait for its first rows) is set-up too: a busy machine stretches it most.
        steps = table[~table["phase"].isin(setup_phases(trace.vocabulary)) & ~first_loads(table)]
        first, last = steps["start_ms"].min(), table["end_ms"].max()
        low, high = fig.layout.xaxis.range or (table["start_ms"].min(), last)  # no range: plotly shows every span
        assert low <= first and last <= high  # every step in view
        assert (last - first) / (high - low) >= 1 - SETUP_SHARE  # a share of the width, whatever the times
        notes = unwrap(fig.layout.title.subtitle.text)
        assert ("opened on the steps" in notes) == (fig.layout.xaxis.range is not None)
    whole = (last - first) / (last - table["start_ms"].min())
    assert whole < 0.05 and "before step 1 (DDP() broadcast, each rank's first load) are left of it" in notes  # the idle time was the width


@pytest.mark.parametrize("name", ["fsdp", "tp"])
def test_a_timeline_opened_on_its_last_step_names_that_step_and_no_step_before_it(name):
    """FSDP's and TP's timelines open on the last step's work (their collectives take a few ms each). The steps that
    began before it are not named at its left edge, where 'step 1' read as the step shown; the step shown is named,
    in the marks and the title, whatever the measured times."""
    from dpviz.engines import engine

    trace = engine(name).record(RunConfig(engine=name, train=True, gpus=2, model="ffn" if name == "tp" else "linear"))
    fig = timeline_figure(trace)
    low, high = fig.layout.xaxis.range
    table = prepare_timeline_ddp(trace, 0, len(trace.batches) - 1)
    starts = table[table["phase"] != "broadcast"].groupby("batch")["start_ms"].min()
    ends = table.groupby("batch")["end_ms"].max()
    shown = [b for b in starts.index if starts[b] < high and ends[b] > low]  # the steps the window shows a part of
    # the step under way at the window's left edge (none where the last one before it had ended: a gap, on a busy machine)
    under_way = [b for b in starts.index if starts[b] <= low < ends[b]][-1:]
    marks = [a for a in fig.layout.annotations if a.name == "step mark"]
    assert marks, "the step shown is named"
    named = [int(re.match(r"(?:step )?(\d+)", a.text).group(1)) - 1 for a in marks]
    assert set(named) <= set(shown) and set(under_way) <= set(named)
    assert all(low <= a.x <= high for a in marks)
    last = int(table.loc[table["group"] >= 0, "batch"].max())
    assert f"opened on step {last + 1} of {len(trace.batches)}" in unwrap(fig.layout.title.text)


def test_ddp_flow_of_a_step_that_failed_at_its_forward_shows_the_rows_each_rank_loaded():
    """ddp-unused-parameter: step 2's forward raises on every rank before it runs. Each rank had loaded its rows
    (DistributedSampler's, the oracle); the Flow shows them and marks the forward, and draws no step after it."""
    from torch.utils.data import DistributedSampler
    from dpviz.engines.ddp.read.flow import flow_ddp_figure
    from dpviz.engines.dp.read.flow_draw import FAILED_COLOR
    from dpviz.presets import ALL_PRESETS

    config = ALL_PRESETS["ddp-unused-parameter"].config
    trace = record_config(config)
    step = trace.failure.batch
    assert not trace.spans_of(step, "forward")  # what makes this case: nothing ran past the load
    fig = flow_ddp_figure(trace, step)
    per_rank = config.batch_size // config.gpus
    for rank in range(config.gpus):
        sampler = DistributedSampler(range(config.data_size), num_replicas=config.gpus, rank=rank,
                                     shuffle=config.shuffle, seed=config.seed)
        want = list(sampler)[step * per_rank:(step + 1) * per_rank]
        hover = next(h for h in fig.data[0].link.customdata if h.startswith(f"rank {rank} reads its own rows"))
        assert hover.endswith(", ".join(map(str, want[:6])) + ", …"), (hover, want)
    nodes = fig.data[0].node
    raised = [i for i, words in enumerate(nodes.customdata) if words.endswith("its forward raised before it ran")]
    assert len(raised) == config.gpus and all(nodes.color[i] == FAILED_COLOR for i in raised)
    assert not any("optimizer" in a.text or "all-reduce" in a.text for a in fig.layout.annotations if a.name == "column")
    assert unwrap(fig.layout.title.text).startswith(f"Step {step + 1} of 4: {config.batch_size} rows on 2 ranks")


def test_ddp_flow_of_uneven_batches_names_the_ranks_without_one_and_stops_at_the_failed_all_reduce():
    from dpviz.engines.ddp.read.flow import flow_ddp_figure
    from dpviz.engines.dp.read.flow_draw import FAILED_COLOR
    from dpviz.presets import ALL_PRESETS

    trace = record_config(ALL_PRESETS["ddp-uneven"].config)
    step = trace.failure.batch
    loaded = sorted({s.lane for s in trace.spans_of(step, "load") if s.rows})
    idle = [lane.id for lane in trace.lanes if lane.id not in loaded]
    assert loaded == [0] and idle == [1, 2]  # the run as torch made it: 10 rows, shards of 4, 3 and 3, batches of 1
    fig = flow_ddp_figure(trace, step)
    assert unwrap(fig.layout.title.text) == f"Step {step + 1} of {len(trace.batches)}: 1 row on 1 rank; ranks 1 and 2 had none"
    nodes = fig.data[0].node
    hub = nodes.customdata.index("all-reduce (mean)")
    assert nodes.color[hub] == FAILED_COLOR
    assert list(fig.data[0].link.target).count(hub) == 1 and hub not in fig.data[0].link.source  # in, never back out
    assert not any("optimizer" in a.text for a in fig.layout.annotations if a.name == "column")


@pytest.mark.parametrize("name", ["four_train", "two_train"])
def test_collectives_that_run_at_once_get_sub_rows_and_those_that_follow_share_one(name):
    # The collectives' row is a fifth of a lane: split into one sub-row per bucket, FSDP's gathers and tensor
    # parallelism's all-reduces were drawn ~5 px tall though none overlapped another. Drawn, no two bars on one
    # sub-row of a rank meet, and no bar could have gone on a lower sub-row than it did (greedy by start time).
    from dpviz.engines.ddp.read.timeline import BUCKET_ROWS, sub_rows

    trace = ddp_trace(name)
    table = prepare_timeline_ddp(trace, 0, len(trace.batches) - 1)
    slots = sub_rows(table)
    collectives = table[table["group"] >= 0].assign(slot=slots).sort_values(["device", "start_ms"], kind="stable")
    assert (slots[table["group"] < 0] == -1).all() and collectives["slot"].between(0, BUCKET_ROWS - 1).all()
    for _, spans in collectives.groupby("device"):
        ends: dict[int, float] = {}
        for span in spans.itertuples():
            lower = [k for k in range(span.slot) if ends.get(k, float("-inf")) <= span.start_ms]
            assert not lower, f"{span.phase} at {span.start_ms:.3f} ms could sit on sub-row {lower[0]}"
            if ends.get(span.slot, float("-inf")) > span.start_ms:  # two meet only when every sub-row is busy
                assert len(ends) == BUCKET_ROWS and all(end > span.start_ms for end in ends.values())
            ends[span.slot] = span.end_ms
    overlapping = any(b.start_ms < a.end_ms for _, spans in collectives.groupby("device")
                      for a, b in zip(spans.itertuples(), spans.iloc[1:].itertuples()))
    assert (collectives["slot"].max() > 0) == overlapping  # sub-rows only where two ran at once
