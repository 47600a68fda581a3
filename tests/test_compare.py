"""The comparison of two engines, computed from two real runs on the same settings: DataParallel against DDP here,
every other pair in tests/test_compare_pairs.py."""
from __future__ import annotations

import functools
import statistics

import pytest

from dpviz.analysis.compare import (_ms, comparison, model_bytes, modelled_times, moves_per_step, per_device, step_seconds,
                                    traffic)
from dpviz.analysis.step_times import LINKS, Measured, measured, modelled, verdict
from dpviz.analysis.traffic_model import StepSizes, growth
from dpviz.engines import ENGINES
from dpviz.config import RunConfig
from dpviz.engines.dp.chunking import chunk_sizes
from dpviz.engines import engine

# Each engine's formula of what a device moves per step, at any count: DataParallel's, DDP's.
dataparallel, distributed = ENGINES["dp"].part("moves_at"), ENGINES["ddp"].part("moves_at")
from dpviz.figures.text_fit import unwrap  # titles read without the line breaks styled() wraps them with

UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}


@functools.cache
def runs(**settings):
    return engine("dp").record(RunConfig(**settings)), engine("ddp").record(RunConfig(engine="ddp", **settings))


def axis_unit(fig, axis: str = "yaxis") -> int:
    """Bytes in one unit of a figure's axis, the unit its title names: "sent per step (MiB)"."""
    return UNITS[fig.layout[axis].title.text.rsplit("(", 1)[1].rstrip(")")]


def test_dataparallel_sends_chunks_and_model_copies_and_takes_back_outputs_and_gradients():
    dp, _ = runs(gpus=3, train=True)
    params, grads = model_bytes(dp)
    assert params == grads == (5 * 2 + 2) * 4  # nn.Linear(5, 2): no buffers
    for batch in dp.batches:
        moves = [m for m in traffic(dp) if m.step == batch.index]
        replicas = dp.replicas(batch.index)
        others = [r for r in replicas if r.lane != 0]
        received = lambda what, lane: sum(m.received for m in moves if m.what == what and m.lane == lane)
        assert {(m.what, m.kind, m.backward) for m in moves} == {
            ("input chunk", "scatter", False), ("parameter copy", "broadcast", False), ("output gathered", "gather", False),
            ("output gradient", "scatter", True), ("gradient sum", "reduce", True)}  # each by the kind that carries it
        assert received("input chunk", 0) == 0 and sum(received("input chunk", r.lane) for r in others) \
            == sum(r.rows for r in others) * 5 * 4
        assert all(received("parameter copy", r.lane) == params for r in others)
        assert received("output gathered", 0) == sum(r.rows for r in others) * 2 * 4
        assert received("gradient sum", 0) == grads * len(others)
        assert sum(m.sent for m in moves) == sum(m.received for m in moves)  # point to point: what leaves arrives


def test_ddp_all_reduces_a_ring_share_of_the_gradients_on_every_rank():
    _, ddp = runs(gpus=4, train=True)
    _, grads = model_bytes(ddp)
    for batch in ddp.batches:
        moves = [m for m in traffic(ddp) if m.step == batch.index]
        assert sorted(m.lane for m in moves) == [0, 1, 2, 3]
        assert all(m.what == m.kind == "all-reduce" and m.backward and m.sent == m.received == round(2 * 3 / 4 * grads)
                   for m in moves)


def test_forward_only_ddp_without_buffers_moves_nothing_while_dataparallel_still_copies_the_model():
    dp, ddp = runs(gpus=2)
    assert traffic(ddp) == []
    assert {m.what for m in traffic(dp)} == {"input chunk", "parameter copy", "output gathered"}


def test_per_device_figures_show_device_zero_carrying_dataparallel():
    dp, ddp = runs(gpus=4, train=True, model="mlp", data_size=96, batch_size=32)
    a, b = per_device(dp), per_device(ddp)
    assert a[0].bytes_per_step > 2 * max(f.bytes_per_step for f in a[1:])
    assert max(f.bytes_per_step for f in b) < a[0].bytes_per_step
    assert sum(f.rows for f in a) == sum(f.rows for f in b) == 96  # every row once: 96 divides evenly
    assert all(f.peak_memory for f in a + b) and a[0].peak_memory > max(f.peak_memory for f in a[1:])
    assert len({f.peak_memory for f in b}) == 1  # ranks hold the same


def test_the_sentences_quote_the_runs_numbers():
    dp, ddp = runs(gpus=4, train=True, model="mlp", data_size=96, batch_size=32)
    text = " ".join(comparison(dp, ddp))
    assert "GPU 0 sends" in text and "each other rank at most" in text and "(computed)" in text
    assert "all-reduce" in text and "parameter copy" in text  # what each sends, by what moves
    summary = measured(dp)
    most = max(summary.high, measured(ddp).high)  # both engines' times in one unit
    assert (f"DataParallel: measured {_ms(summary.median, most)} (the median of 2 steps after the first; middle half "
            f"{_ms(summary.low, most)} to {_ms(summary.high, most)}), modelled {modelled_times(dp, ddp)[0]}") in text
    assert summary.median == statistics.median(step_seconds(dp)[1:])  # the first step, a warm-up, left out
    assert "DataParallel's GPUs handled 96 rows (96 distinct)" in text and "DDP's ranks handled 96 rows (96 distinct)" in text
    _, padded = runs(gpus=3, data_size=10, batch_size=6, shuffle=False)
    assert "handled 12 rows (10 distinct: 2 loaded again)" in " ".join(comparison(runs(gpus=3, data_size=10, batch_size=6,
                                                                                      shuffle=False)[0], padded))


def test_the_comparison_figure_draws_each_engines_traffic_by_what_moves():
    from dpviz.figures.compare import comparison_figure

    dp, ddp = runs(gpus=4, train=True, model="mlp", data_size=96, batch_size=32)
    fig = comparison_figure(dp, ddp)
    left = {bar.name for bar in fig.data if bar.xaxis == "x"}
    right = {bar.name for bar in fig.data if bar.xaxis == "x2"}
    assert left == {"input chunk (scatter)", "parameter copy (broadcast)", "output gathered",
                    "output gradient (scatter)", "gradient sum (reduce)"}  # what moves, and the kind that carries it
    assert right == {"all-reduce", "buffers (broadcast)"}  # BatchNorm's buffers, from rank 0
    from dpviz.trace.legend import KINDS
    for bar in fig.data:  # coloured by kind, the legend's, hatched when it moves for the backward pass
        if bar.type == "bar":
            kind = "gather" if bar.name == "output gathered" else bar.name.rsplit("(", 1)[-1].rstrip(")")
            assert bar.marker.color == KINDS[kind].color
            assert (bar.marker.pattern.shape == "x") == (bar.name in ("output gradient (scatter)", "gradient sum (reduce)", "all-reduce"))
    unit = axis_unit(fig)
    gpu0 = sum(bar.y[list(bar.x).index("GPU 0")] for bar in fig.data if bar.xaxis == "x" and "GPU 0" in bar.x) * unit
    assert gpu0 == pytest.approx(max(f.bytes_per_step for f in per_device(dp)), abs=1) and "GPU 0 sends" in unwrap(fig.layout.annotations[0].text)
    rank = max(f.bytes_per_step for f in per_device(ddp))
    assert f"DataParallel's GPU 0 sends {gpu0 / rank:.1f}× what DDP's rank 0 sends" in unwrap(fig.layout.title.text)  # BatchNorm's buffers: rank 0 sends most
    # both top panels on one scale, so GPU 0's bar and a rank's are compared by height
    assert fig.layout.yaxis.range == fig.layout.yaxis2.range and fig.layout.yaxis.range[1] * unit >= gpu0


def test_the_ddp_flow_shows_each_rank_reading_its_own_rows_into_one_all_reduce():
    from dpviz.figures.views import flow_any

    _, ddp = runs(gpus=4, train=True)
    for step in (0, len(ddp.batches) - 1):
        sankey = flow_any(ddp, step).data[0]
        labels = list(sankey.node.customdata)  # every node's words (its hover); the ranks' names are tags on their bands
        forwards = sorted(ddp.spans_of(step, "forward"), key=lambda s: s.lane)
        tags = [a.text.replace("<br>", ": ") for a in flow_any(ddp, step).layout.annotations if a.name == "rank tag"]
        assert not any(sankey.node.label) and tags == labels[1:5]
        assert [labels[1 + i] for i in range(4)] == [f"rank {s.lane}: {s.rows} row{'s' if s.rows != 1 else ''}"
                                                     for s in forwards]
        assert labels.count("all-reduce (mean)") == 1 and not any("scatter" in l or "gather" in l for l in labels)
        assert list(sankey.link.value[:2]) == [forwards[0].rows] * 2  # rows read, then computed on rank 0
    _, forward_only = runs(gpus=2)
    assert "all-reduce (mean)" not in flow_any(forward_only, 0).data[0].node.customdata


SIZES = dict(train=True, model="mlp", data_size=96, batch_size=32)  # full batches at 2, 4 and 8; BatchNorm's buffers


@pytest.mark.parametrize("devices", [2, 4, 8])
def test_the_formulas_give_the_bytes_the_two_runs_moved(devices):
    dp, ddp = runs(gpus=devices, **SIZES)
    sizes = StepSizes.of(dp, ddp)
    assert sizes.buffers > 0 and sizes.gradients > 0
    assert dataparallel(sizes, devices) == moves_per_step(dp)
    assert distributed(sizes, devices) == moves_per_step(ddp)
    [first], [second] = growth(sizes, [devices], dataparallel), growth(sizes, [devices], distributed)
    assert first.first == per_device(dp)[0].bytes_per_step and second.most == max(f.bytes_per_step for f in per_device(ddp))


def test_gpu0_grows_with_every_device_while_a_ranks_all_reduce_stays_under_twice_the_gradients_each_way():
    dp, ddp = runs(gpus=4, **SIZES)
    sizes = StepSizes.of(dp, ddp)
    rows = [(g, r) for g, r in zip(growth(sizes, range(2, 17), dataparallel), growth(sizes, range(2, 17), distributed))]
    used = lambda count: len(chunk_sizes(sizes.rows, count))  # torch.chunk may leave the last devices idle
    assert all(b.first > a.first if used(b.devices) > used(a.devices) else b.first == a.first
               for (a, _), (b, _) in zip(rows, rows[1:]))
    assert all(r.most < 2 * sizes.gradients + sizes.buffers * (r.devices - 1) for _, r in rows)  # sent: the ring's share
    for count in range(3, 17):  # GPU 0 stands out: it carries what every other GPU moves, together
        moves = [sent + received for sent, received in dataparallel(sizes, count)]
        assert moves[0] == sum(moves[1:]) and moves[0] >= (used(count) - 1) * max(moves[1:]) * 0.9
        sent = [sent for sent, _ in dataparallel(sizes, count)]  # and sends each other GPU more than it sends back
        assert sent[0] >= (used(count) - 1) * max(sent[1:]) and [g.first for g, _ in rows if g.devices == count] == [sent[0]]


def test_the_growth_panel_draws_the_formulas_and_marks_this_run():
    from dpviz.figures.compare import comparison_figure, growth_figure

    dp, ddp = runs(gpus=4, **SIZES)
    fig = growth_figure(dp, ddp)
    lines = {trace.name: trace for trace in fig.data if trace.type == "scatter"}
    sizes = StepSizes.of(dp, ddp)
    unit = axis_unit(fig)  # the lines' unit, the bars' above them
    assert unit == axis_unit(comparison_figure(dp, ddp))
    assert [y * unit for y in lines["DataParallel: GPU 0"].y] == pytest.approx([r.first for r in growth(sizes, range(2, 17), dataparallel)])
    assert [y * unit for y in lines["DataParallel: any other GPU"].y] == pytest.approx([r.other for r in growth(sizes, range(2, 17), dataparallel)])
    assert [y * unit for y in lines["DDP: any rank"].y] == pytest.approx([r.most for r in growth(sizes, range(2, 17), distributed)])
    assert [shape.x0 for shape in fig.layout.shapes] == [4]


def test_the_growth_lines_are_keyed_under_the_chart_in_the_pages_ink_and_this_run_is_marked_over_them():
    """The lines' names ran into the axis's numbers and each other, written in the lines' colours (2.3:1 on white);
    the dotted mark of this run's count was drawn across GPU 0's line; eight 'GPU 3's ran together on a 440 px
    chart; an amount broke from its unit ('at most 1.75' / 'MiB a rank')."""
    import re

    from dpviz.figures.colors import THEME_TEXT
    from dpviz.figures.compare import comparison_figure, growth_figure
    from dpviz.figures.presenting import presentation
    from dpviz.figures.text_fit import SOFT_BREAK

    dp, ddp = runs(gpus=8, **SIZES)
    growth = growth_figure(dp, ddp)
    lines = [trace for trace in growth.data if trace.type == "scatter"]
    assert {line.legend for line in lines} == {"legend2"} and growth.layout.legend2.font.color == THEME_TEXT
    assert growth.layout.legend2.y < 0 and growth.layout.margin.b > 60  # under the plot, in a margin made for its rows
    [mark] = growth.layout.shapes
    assert mark.x0 == mark.x1 == 8 and mark.y0 > max(line.y[list(line.x).index(8)] for line in lines)
    assert mark.y1 <= growth.layout.yaxis.range[1]
    fig = comparison_figure(dp, ddp)
    for figure in (fig, growth):
        assert not [a.text for a in figure.layout.annotations if a.font.color]  # no text in a line's colour
    assert list(fig.layout.xaxis.ticktext) == [str(i) for i in range(8)] and fig.layout.xaxis.title.text == "GPU"
    assert list(fig.layout.xaxis2.ticktext) == [str(i) for i in range(8)] and fig.layout.xaxis2.title.text == "rank"
    assert [bar.x[0] for bar in fig.data if bar.type == "bar"][0].startswith("GPU")  # the hover names it whole
    two = comparison_figure(*runs(gpus=2, **SIZES))
    assert list(two.layout.xaxis.ticktext) == ["GPU 0", "GPU 1"]  # two names fit side by side
    for figure in (fig, presentation(fig), growth, presentation(growth)):
        for title in [*figure.layout.annotations, figure.layout.title]:
            for amount in re.findall(r"\d[\d,.]* (?:B|KiB|MiB|GiB)", unwrap(title.text)):
                assert any(amount in line for line in title.text.split(SOFT_BREAK)), title.text


def test_a_winner_is_named_only_when_the_spreads_do_not_overlap():
    quick, slow = Measured(1.0, 0.9, 1.1, 10), Measured(2.0, 1.8, 2.2, 10)
    assert verdict(quick, slow) == 0 and verdict(slow, quick) == 1
    assert verdict(quick, Measured(1.05, 1.0, 1.5, 10)) is None  # overlapping middle halves
    assert verdict(quick, Measured(2.0, 1.8, 2.2, 2)) is None  # too few steps after the warm-up
    assert verdict(None, quick) is None


def test_the_modelled_time_is_the_busiest_links_bytes_over_its_bandwidth():
    dp, ddp = runs(gpus=4, **SIZES)
    moves = moves_per_step(dp)
    pcie = LINKS[0]
    assert modelled(moves, pcie) == max(max(m) for m in moves) / pcie.bytes_per_second
    assert modelled(moves, pcie) > modelled(moves_per_step(ddp), pcie)  # GPU 0's link is the bottleneck


def test_five_reloads_of_the_same_link_never_call_an_engine_faster_on_a_cpu_and_model_the_same_times():
    said = []
    for _ in range(5):  # five reloads of engine=both&gpus=4&train=true&data_size=300 (10 steps), each run anew
        dp = engine("dp").record(RunConfig(gpus=4, train=True, data_size=300))
        ddp = engine("ddp").record(RunConfig(engine="ddp", gpus=4, train=True, data_size=300))
        text = " ".join(comparison(dp, ddp))
        said.append(("faster here" in text or "measurably faster" in text, tuple(modelled_times(dp, ddp))))
    assert not any(faster for faster, _ in said)  # threads and processes on a CPU: no verdict, whichever ran quicker
    assert len({modelled for _, modelled in said}) == 1  # the same every time


def slowed(trace, factor: float):
    """`trace` with every span `factor` times as long, from the same start: its steps take `factor` times as long."""
    import dataclasses

    spans = [dataclasses.replace(s, start=s.start * factor, end=s.end * factor) for s in trace.spans]
    return dataclasses.replace(trace, spans=spans)


def test_cpu_times_call_no_engine_faster_and_each_stands_beside_its_spread_and_modelled_time():
    import re

    dp, ddp = runs(gpus=2, train=True, data_size=300)  # 10 steps: 9 after the warm-up, enough for a verdict on GPUs
    ddp = slowed(ddp, 1000)  # every DDP step far slower than every DataParallel step: spreads far apart
    assert verdict(measured(dp), measured(ddp)) == 0  # what a verdict would say, were these GPUs
    sentences = comparison(dp, ddp)
    text = " ".join(sentences)
    assert "faster" not in text.replace("neither engine faster", "")  # no verdict from CPU threads and processes
    assert "on this machine's CPU, not on GPUs" in text and "threads" in text and "processes" in text
    timed = next(s for s in sentences if s.startswith("Time per step"))
    for name, model in zip((dp.spec.label, ddp.spec.label), modelled_times(dp, ddp)):
        # the engine's time: its median with its middle half, and beside it the time modelled on real links
        clause = re.search(rf"\b{name}: measured (.*?\)), modelled (.*?)\. ", timed)
        assert clause and "middle half" in clause[1] and clause[2] == model, (name, timed)
        assert all(link.name in model for link in LINKS)
    times = re.findall(r"\d[\d,.]* (?:ns|µs|ms|s)\b", text)
    quoted = {m for m in re.findall(r"\d[\d,.]* (?:ns|µs|ms|s)\b", timed)}
    assert set(times) <= quoted  # no time anywhere else under the chart, alone


def test_on_gpus_a_winner_is_named_only_beside_its_spread_and_modelled_time():
    import dataclasses

    dp, ddp = runs(gpus=2, train=True, data_size=300)
    gpus = [dataclasses.replace(t, backend="cuda") for t in (dp, slowed(ddp, 1000))]
    timed = next(s for s in comparison(*gpus) if s.startswith("Time per step"))
    assert "Measured on these GPUs: DataParallel's middle half of steps lies wholly below the other's" in timed
    assert timed.count("middle half") == 3 and timed.count(", modelled ") == 2


UNIT = r"\d[\d,.]* ([KMG]iB|B|ns|µs|ms)\b"


def test_memory_and_bytes_side_by_side_in_one_unit_and_no_range_of_one_value():
    import re

    dp, ddp = runs(gpus=2, train=True)
    sentences = comparison(dp, ddp)
    memory = next(s for s in sentences if s.startswith("Memory"))
    peaks = [f.peak_memory for f in per_device(ddp)]
    assert len(set(peaks)) == 1  # every rank holds the same: one figure, not a range
    assert "between" not in memory and not re.search(r"between (\S+ \S+) and \1", " ".join(sentences))
    for sentence in (memory, next(s for s in sentences if s.startswith("Per step"))):  # DataParallel's and DDP's, side by side
        assert len(set(re.findall(UNIT, sentence))) == 1, sentence
    engines = [[part.split(" over ") for part in said.split(", ")] for said in modelled_times(dp, ddp)]
    for (a, link), (b, same) in zip(*engines):  # each link's two times, DataParallel's and DDP's, in one unit
        assert link == same and a.split()[1] == b.split()[1], engines
    timed = next(s for s in sentences if s.startswith("Time per step"))
    measured_times = re.findall(r"measured (\S+ \S+) \(the median of \d+ steps? after the first; middle half (\S+ \S+) "
                                r"to (\S+ \S+)\)", timed)
    assert len(measured_times) == 2 and len({t.split()[1] for t in sum(measured_times, ())}) == 1, timed


def test_bytes_alike_and_bytes_range():
    from dpviz.analysis.wording import bytes_alike, bytes_range

    assert bytes_alike(1210, 640) == ["1.18 KiB", "0.62 KiB"] and bytes_alike(640, 512) == ["640 B", "512 B"]
    assert bytes_range(640, 640) == "640 B" and bytes_range(1260, 1261) == "1.23 KiB"  # the same when read
    assert bytes_range(512, 2048) == "between 0.50 KiB and 2.00 KiB"
    assert bytes_alike(3 * 1024 ** 2, 1024)[1] != "0.00 MiB"  # small beside large keeps its digits


@pytest.mark.parametrize("settings, change", [
    (dict(), "turn on training and use 3 GPUs"),  # the page's defaults: 2 GPUs, forward only
    (dict(gpus=2, train=True), "use 3 GPUs"),
    (dict(gpus=4), "turn on training"),
    (dict(gpus=4, train=True, data_size=8, batch_size=2), "use batches of 3 rows or more on 3 GPUs or more"),
    (dict(gpus=3, train=True, data_size=16, batch_size=4), "use 4 GPUs"),  # torch.chunk: 2 + 2 rows on 3 GPUs
])
def test_settings_that_cannot_show_gpu0_as_the_hub_say_what_would(settings, change):
    from dpviz.engines.dp.read.hub_lesson import hub_lesson
    from dpviz.figures.compare import comparison_figure

    dp, ddp = runs(**settings)
    lesson = hub_lesson(dp, ddp)
    assert not lesson.shows and lesson.change == change
    title = unwrap(comparison_figure(dp, ddp).layout.title.text)
    assert title == f"These settings cannot show GPU 0 as the hub: {change}"  # no ratio over bars that cannot show it
    first = comparison(dp, ddp)[0]
    assert first.startswith(f"These settings cannot show GPU 0 as the hub ({lesson.why}). {change[0].upper()}{change[1:]} to see")


def test_the_settings_the_lesson_names_show_gpu0_as_the_hub():
    """What the defaults' sentence asks for (training, 3 GPUs), run: GPU 0 sends more than twice what any other
    device sends, and the title says how much more than a DDP rank."""
    from dpviz.engines.dp.read.hub_lesson import hub_lesson
    from dpviz.figures.compare import comparison_figure

    dp, ddp = runs(gpus=3, train=True)
    assert hub_lesson(dp, ddp).shows
    a, b = per_device(dp), per_device(ddp)
    assert a[0].bytes_per_step > 2 * max(f.bytes_per_step for f in a[1:] + b)
    title = unwrap(comparison_figure(dp, ddp).layout.title.text)
    assert title.startswith("In one whole step, DataParallel's GPU 0 sends") and not any(s.startswith("These settings") for s in comparison(dp, ddp))
