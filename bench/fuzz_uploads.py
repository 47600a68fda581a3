"""Generated uploads: real traces, mutated at random, must be refused with one sentence or draw every view.

    .venv/bin/python bench/fuzz_uploads.py                 # 2,000 cases from seed 0
    .venv/bin/python bench/fuzz_uploads.py --cases 5000 --seed 7
    .venv/bin/python bench/fuzz_uploads.py --cases 0 --field-cases 300   # one field off, every engine, only

A few small real runs are recorded (the tutorial, a training run, failing and warning pitfalls, a GRU
on dim 1 with its hidden state, one device, and one dressed as a CUDA run), written as trace files and
read back as plain JSON values. Each case takes one of them and changes it: a value replaced by one of
a pool of hostile ones (2**63, 1e302, NaN, a lone surrogate, markup, long text, wrong types), a
neighbouring number, a key deleted, list items duplicated, dropped or swapped. The result is handed to
trace_json.loads as text, as bytes or as UTF-8 with raw non-ASCII characters. It must either raise
TraceError whose message is one sentence, or give a trace that every view draws (draw_everything: each
view of the page's registry, dpviz.figures.views, with every batch or window it offers, then the key
figures, the explanation, the HTML report, the tutorial log and both downloads).
A view the file lacks something for must say so in one sentence instead (View.lacks, as the page does).
Then the field cases (bench/field_cases.py): a real run of every engine with one field changed, removed or retyped,
held to the same rule. Any other outcome is a failure, printed with the seed and case that reproduce it; the script
exits 1.
tests/test_upload_fuzz.py runs a few hundred cases of the same generator.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import random
import sys
import time
import traceback
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere without installing

from dpviz import RunConfig, TraceError, figures, record
from dpviz.exports import chrome_trace
from dpviz.analysis import explain
from dpviz.analysis import summary
from dpviz.trace import json_io as trace_json
from dpviz.exports import tutorial_log
from dpviz.figures import views
from dpviz.figures.report import markdown_to_html
from dpviz.presets import PRESETS
from dpviz.trace import Trace
from field_cases import RUNS, field_cases  # noqa: E402  beside this file

# Values no real run writes where they land, or only in one place.
NASTY: list[Any] = [
    2**63, 2**70, -(2**63) - 1, -1, 0, 1, 15, 16, 17, 2**31, 2**48, 10**6, 10**9, 10**300,
    1e302, -1e302, 1e-300, -0.0, 0.5, 604_800.5, float("nan"), float("inf"), float("-inf"),
    "\ud800", "a\udfffb", "<a href='http://x'>y</a>", "![x](http://h/x.png)", "**bold** `code` $x$", "x" * 5_000,
    "x" * 70_000, "", "a\nb", "\x00", "\u202e", "😀" * 20, "forward", "backward", "loss", "gather", "allocated",
    "cuda", "measured", "parameters", "split", "x", "scale=", [], [[]], [[[[]]]], [0], [1, 2], [-1], [2**70],
    ["a"], [None], None, True, False, {}, {"a": 1}, {"batch": 0},
]
# Text a run could hold in a name or a message, that a page must show as text.
TEXTS = [
    "<a href='http://x'>y</a>", "<script>alert(1)</script>", "![x](http://h/x.png)", "[link](javascript:alert(1))",
    "**bold** `code` $x$ _i_ # h", "a\nb\r\nc\td", "\x00\x1b[31m", "\u202e\u200b", "é中😀" * 30, "{0} %s {{x}}",
    "&amp; &lt;", "\\", "`", "n" * 100, "m" * 20_000, " ", "",
]
# Numbers at the edges of what loading accepts.
EDGES = [0, -0.0, 1, 604_800.0, 604_799.9999999, 2**48, 2**48 - 1, 1e12, -1e12, 1e-300, 999_999, 1_000_000, 15]


@lru_cache(maxsize=None)
def base_documents() -> tuple[str, ...]:
    """Small real traces as trace files: the runs a mutation starts from."""
    configs = [
        RunConfig(),  # the tutorial
        RunConfig(gpus=3, train=True, data_size=50, batch_size=20),
        PRESETS["kwargs-small-batch"].config,  # fails in its last batch
        PRESETS["batchnorm-one-row"].config,  # a training run that fails
        PRESETS["scalar-loss"].config,  # a warning and loss facts
        PRESETS["state-lost"].config,  # counter state
        RunConfig(model="gru_dim1", inputs="hidden", gpus=3, data_size=40, batch_size=16),
        RunConfig(gpus=1, train=True, data_size=20, batch_size=8, shuffle=False),
        RunConfig(model="cnn", inputs="dict", gpus=4, data_size=30, batch_size=9, input_size=3),
    ]
    documents = [trace_json.dumps(record(dataclasses.replace(c, backend="simulated"))) for c in configs]
    return (*documents, _as_cuda(documents[1]))


def _as_cuda(document: str) -> str:
    """A simulated trace dressed as a real GPU run: named CUDA lanes and measured memory."""
    data = json.loads(document)
    data.update(backend="cuda", memory_kind="measured", machine_gpus=len(data["lanes"]))
    for lane in data["lanes"]:
        lane["name"] = f"cuda:{lane['id']} NVIDIA H200"
    totals: dict[tuple, int] = {}
    for batch, phase, lane, _, size in data["memory"]:
        totals[(batch, phase, lane)] = totals.get((batch, phase, lane), 0) + size
    data["memory"] = [[batch, phase, lane, "allocated", size] for (batch, phase, lane), size in totals.items()]
    return json.dumps(data)


def _places(value: Any, path: tuple = ()) -> Iterator[tuple]:
    """The path of every value inside `value`, containers included (the root excepted)."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, item in items:
        yield path + (key,)
        yield from _places(item, path + (key,))


def _parent(doc: Any, path: tuple) -> Any:
    for key in path[:-1]:
        doc = doc[key]
    return doc


def _near(value: Any, rng: random.Random) -> Any:
    """A value close to `value`: what an off-by-one or a wrong unit would write."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return rng.choice([value + 1, value - 1, -value, value * 2, value * 1000, 0, str(value), float(value)])
    if isinstance(value, float):
        return rng.choice([value * 1e6, -value, value + 1e-9, int(value), 1e9, str(value)])
    if isinstance(value, str):
        return rng.choice([value.upper(), value + "\ud800", value * 3, value[:-1], "\u00e9" + value, ""])
    if isinstance(value, list):
        return rng.choice([value * 2, value[:-1], list(reversed(value)), [value], {"0": value}, tuple(value)])
    if isinstance(value, dict):
        return rng.choice([list(value.values()), {**value, "extra": 1}, {k: None for k in value}])
    return rng.choice(NASTY)


def _free_text(path: tuple) -> bool:
    """Whether `path` leads to text a run writes freely: a name, a version, a message, an argument's words."""
    return (path[0] in ("threads", "torch_version") and len(path) <= 2
            or path[0] == "lanes" and path[-1] == "name"
            or path[0] == "arguments" and len(path) == 3 and path[2] in (3, 4)
            or path[0] in ("failure", "warnings") and path[-1] in ("type", "message", "category"))


def mutate(doc: Any, rng: random.Random) -> str:
    """Change `doc` in place once, and say how."""
    places = list(_places(doc))
    kind = rng.random()
    if kind < 0.25:  # free text or a number at the edge: many of these load, and every view must draw them
        pool, fits = (TEXTS, _free_text) if kind < 0.15 else (EDGES, lambda p: type(_parent(doc, p)[p[-1]]) in (int, float))
        chosen = [p for p in places if fits(p)]
        if chosen:
            path = rng.choice(chosen)
            _parent(doc, path)[path[-1]] = rng.choice(pool)
            return f"{path} = {_short(_parent(doc, path)[path[-1]])}"
    path = rng.choice(places)
    parent, key = _parent(doc, path), path[-1]
    if kind < 0.5:
        parent[key] = copy.deepcopy(rng.choice(NASTY))
        return f"{path} = {_short(parent[key])}"
    if kind < 0.7:
        parent[key] = _near(parent[key], rng)
        return f"{path} ~ {_short(parent[key])}"
    if isinstance(parent, dict):
        del parent[key]
        return f"del {path}"
    if kind < 0.8:
        parent.insert(key, copy.deepcopy(parent[key]))
        return f"duplicate {path}"
    if kind < 0.9:
        del parent[key]
        return f"drop {path}"
    other = rng.randrange(len(parent))
    parent[key], parent[other] = parent[other], parent[key]
    return f"swap {path} and {other}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


def make_case(seed: int, index: int) -> tuple[str | bytes, list[str]]:
    """Case `index` of run `seed`: a mutated trace file (text, ASCII bytes or UTF-8 bytes) and what was changed."""
    rng = random.Random(f"{seed}-{index}")
    doc = json.loads(rng.choice(base_documents()))
    changes = [mutate(doc, rng) for _ in range(rng.choice([1, 1, 1, 2, 3]))]
    form = rng.choice(["text", "bytes", "utf-8"])
    if form == "text":
        return json.dumps(doc), changes
    if form == "bytes":
        return json.dumps(doc).encode("ascii"), changes + ["as bytes"]
    # Raw UTF-8: a lone surrogate cannot be written so, and comes out as bytes that are not UTF-8.
    return json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogatepass"), changes + ["as UTF-8 bytes"]


def _text_out(text: str) -> None:
    """What the page shows must be text a browser and Arrow can take: UTF-8."""
    text.encode("utf-8")


def _figure(figure) -> None:
    _text_out(figure.to_json())  # what st.plotly_chart sends


def _choices(trace: Trace, view: views.View, every: bool) -> list[tuple]:
    """The arguments the page can draw `view` with: every batch (or window), or with `every` False the
    first, the last and the failed batch (the first and last window)."""
    count = len(trace.batches)
    if view.control == views.BATCH:
        batches = range(count) if every else {0, count - 1, *([trace.failure.batch] if trace.failure else [])}
        return [(b,) for b in sorted(batches)]
    if view.control == views.WINDOW:
        starts = list(range(0, count, view.window(trace)))
        return [(b,) for b in (starts if every else sorted({starts[0], starts[-1]}))]
    if view.control == views.SAMPLED:
        return [(b,) for b in view.sampled(trace)]
    return [()]


def draw_everything(trace: Trace, every: bool = True, verify: bool = True, report: bool = True) -> None:
    """Every view of `trace` as the page, the report and the downloads make them; raises what they raise.
    `verify` adds what only a test does: the Chrome trace as strict JSON and the written trace read back
    as the same file. Without `report` the HTML report (which draws the views again) is left out, but
    not the parts only it has."""
    for view in views.views_of(trace):
        if view.shows(trace):  # as the page: a view with nothing for this run (no pitfall) has no tab
            lacking = view.lacks(trace)  # what the file lacks for it: the page says so in its place
            if lacking is not None:
                if not one_sentence(lacking):
                    raise AssertionError(f"{view.key}: what the file lacks is not one sentence: {lacking!r}")
                continue
            for args in _choices(trace, view, every):
                drawn = view.build(trace, *args)
                if view.control == views.TEXT:
                    _text_out(drawn)
                else:
                    _figure(drawn)
            if view.detail is not None and trace.engine == "dp" and len(trace.batches) > view.detail_window:
                for first in sorted({0, len(trace.batches) - 1}):  # the page's batch by batch switch
                    _figure(view.detail(trace, first))
    for label, value in summary.key_figures(trace).items():
        _text_out(label + value)
    for paragraph in explain.explain(trace):
        _text_out(paragraph)
        _text_out(markdown_to_html(paragraph))
    _text_out(summary.summary_table(trace).to_html())
    if report:
        _text_out(figures.html_report(trace))
    _text_out(tutorial_log.tutorial_log(trace))
    _text_out(chrome_trace.dumps(trace))
    written = trace_json.dumps(trace)  # the page's download
    if verify:
        json.dumps(chrome_trace.to_chrome_trace(trace), allow_nan=False)  # strict JSON: Perfetto's reader
        if trace_json.dumps(trace_json.loads(written)) != written:
            raise AssertionError("a loaded trace does not survive being written and read again")


def one_sentence(message: str) -> bool:
    return bool(message) and "\n" not in message and message.endswith(".") and len(message) < 400


@dataclasses.dataclass
class Tally:
    """How a run of cases went."""

    rejected: int = 0
    drawn: int = 0
    failures: list[str] = dataclasses.field(default_factory=list)


def run_case(seed: int, index: int, tally: Tally, draw: Callable[[Trace], None] = draw_everything) -> None:
    """Load case `index` of `seed` and draw it if it loads; a failure is recorded with what reproduces it."""
    text, changes = make_case(seed, index)
    judge(text, f"seed {seed} case {index} ({'; '.join(changes)})", tally, draw)


def judge(text: str | bytes, where: str, tally: Tally, draw: Callable[[Trace], None] = draw_everything) -> None:
    """Load `text` and draw it if it loads; a failure is recorded under `where`, what reproduces it."""
    try:
        trace = trace_json.loads(text)
    except TraceError as error:
        tally.rejected += 1
        if not one_sentence(str(error)):
            tally.failures.append(f"{where}: the refusal is not one sentence: {str(error)[:300]!r}")
        return
    except Exception:
        tally.failures.append(f"{where}: loads raised\n{traceback.format_exc(limit=-4)}")
        return
    try:
        draw(trace)
        tally.drawn += 1
    except Exception:
        tally.failures.append(f"{where}: a view raised\n{traceback.format_exc(limit=-4)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--field-cases", type=int, default=100, help="cases of one field off, per engine")
    args = parser.parse_args()
    if args.cases < 0 or args.field_cases < 0:
        parser.error("--cases and --field-cases must be at least 0")
    start = time.perf_counter()
    base_documents()
    tally = Tally()
    for index in range(args.cases):
        run_case(args.seed, index, tally)
        if (index + 1) % 100 == 0:
            print(f"  {index + 1:,} cases: {tally.rejected:,} rejected, {tally.drawn:,} drawn, "
                  f"{len(tally.failures):,} failed", flush=True)
    print(f"seed {args.seed}, {args.cases:,} cases in {time.perf_counter() - start:,.0f} s: "
          f"{tally.rejected:,} rejected with one sentence, {tally.drawn:,} accepted and drawn, "
          f"{len(tally.failures):,} failed", flush=True)
    fields = {engine: Tally() for engine in RUNS}
    start = time.perf_counter()
    for engine, where, text in field_cases(args.seed, args.field_cases):
        judge(text, f"seed {args.seed} {where}", fields[engine], lambda trace: draw_everything(trace, every=False))
    for engine, each in fields.items():
        print(f"one field off, {engine}: {each.rejected + each.drawn + len(each.failures):,} cases, {each.rejected:,} "
              f"rejected with one sentence, {each.drawn:,} accepted and drawn, {len(each.failures):,} failed")
    print(f"one field off: {time.perf_counter() - start:,.0f} s")
    failures = tally.failures + [failure for each in fields.values() for failure in each.failures]
    for failure in failures:
        print(f"FAILED {failure}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
