"""Uploads: any file is refused with one sentence, cheaply when it is large, or it draws every view.

The generated cases come from bench/fuzz_uploads.py (which runs thousands): small real traces with a
value replaced by a hostile one, a key deleted or list items duplicated, dropped or swapped.
"""
import dataclasses
import json
import sys
import tracemalloc
from pathlib import Path

import pytest

from dpviz import RunConfig, TraceError, record
from dpviz.trace import json_io as trace_json
from figure_traces import synthetic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from fuzz_uploads import Tally, draw_everything, one_sentence, run_case  # noqa: E402

SEED = 20_251_203
CHUNKS, PER_CHUNK = 4, 50
REPORT_EVERY = 5  # the HTML report draws every view again: for one case in five, the others draw each once
FILL = 63 * 2**20  # a hostile file fills the 64 MiB upload limit but for a margin


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_mutated_traces_are_refused_with_a_sentence_or_draw_every_view(chunk):
    tally = Tally()
    for index in range(chunk * PER_CHUNK, (chunk + 1) * PER_CHUNK):
        run_case(SEED, index, tally, lambda trace: draw_everything(trace, report=index % REPORT_EVERY == 0))
    assert not tally.failures, "\n\n".join(tally.failures)  # each names its seed and case
    assert tally.rejected + tally.drawn == PER_CHUNK


@pytest.fixture(scope="module")
def data():
    """The tutorial's run as plain JSON values, to edit."""
    return json.loads(trace_json.dumps(record(RunConfig(backend="simulated"))))


def _refused(document, *words):
    """loads refuses `document` with one sentence holding `words`."""
    with pytest.raises(TraceError) as error:
        trace_json.loads(document)
    message = str(error.value)
    assert one_sentence(message), message
    for word in words:
        assert word in message, message
    return message


def _edited(data, edit):
    data = json.loads(json.dumps(data))
    edit(data)
    return json.dumps(data)


@pytest.mark.parametrize("edit,words", [
    # Each once made a view raise: key figures (int64), captions and Arrow (UTF-8), the Chrome trace (1e302).
    (lambda d: d["memory"][0].__setitem__(4, 2**63), ["memory sample bytes", "281,474,976,710,656"]),
    (lambda d: d["lanes"][1].update(name="GPU \ud800"), ["lane name", "lone surrogate"]),
    (lambda d: d.update(torch_version="\udfff"), ["torch_version", "lone surrogate"]),
    (lambda d: d["threads"].__setitem__(0, "\ud800"), ["thread name", "lone surrogate"]),
    (lambda d: d["spans"][0].__setitem__(3, 1e302), ["start and end", "604,800 seconds"]),
    (lambda d: d["spans"][0].__setitem__(2, -0.5), ["start and end"]),
    (lambda d: d["lanes"][0].update(name="x" * 201), ["lane name", "200"]),
    (lambda d: d["threads"].__setitem__(0, "t" * 101), ["thread name", "100"]),
    (lambda d: d.update(torch_version="1" * 65), ["torch_version", "64"]),
    (lambda d: d.update(machine_gpus=2**70), ["machine_gpus", "1,024"]),
    (lambda d: d["batches"][0]["input_shape"].__setitem__(1, 0), ["input_shape", "1 and 1,000,000"]),
    (lambda d: d["batches"][0].update(output_shape=[1] * 9), ["output_shape", "dimensions"]),
    (lambda d: d["warnings"].append({"category": "UserWarning", "message": "m", "batch": 0, "count": 100_000}),
     ["warning", "times"]),
    (lambda d: d["config"].update(model="m" * 10_000), ["config setting 'model'", "32"]),
    (lambda d: d["config"].update(**{"k" * 5_000: 1}), ["unknown setting"]),
    (lambda d: d.update(span_fields=list(range(10**5))), ["span_fields", "a list of 100,000 items"]),
])
def test_values_no_run_makes_are_refused_naming_the_field_and_the_range(data, edit, words):
    message = _refused(_edited(data, edit), *words)
    assert len(message) < 300  # the offending value is quoted short


def test_a_lone_surrogate_in_text_handed_over_as_str_is_refused(data):
    document = _edited(data, lambda d: d["lanes"][0].update(name="ok")).replace('"ok"', '"\ud800"')
    _refused(document, "lone surrogate")


def test_the_longest_allowed_names_load_and_draw(data):
    def longest(d):
        d["lanes"][0]["name"] = "n" * 200
        d["threads"][0] = "t" * 100
        d["torch_version"] = "v" * 64
        d["warnings"].append({"category": "c" * 100, "message": "<a href='http://x'>m</a> " * 800, "batch": 1, "count": 2})

    draw_everything(trace_json.loads(_edited(data, longest)))


def test_utf8_text_loads_as_text_bytes_and_utf8_bytes(data):
    names = ["GPU é", "GPU 😀"]
    document = _edited(data, lambda d: [lane.update(name=name) for lane, name in zip(d["lanes"], names)])
    raw = json.dumps(json.loads(document), ensure_ascii=False)
    for form in (document, document.encode(), raw, raw.encode(), b"\xef\xbb\xbf" + raw.encode()):
        assert [lane.name for lane in trace_json.loads(form).lanes] == names


def test_bytes_that_are_not_utf8_inside_a_string_are_refused(data):
    document = _edited(data, lambda d: d["lanes"][0].update(name="GPU x")).encode()
    _refused(document.replace(b"GPU x", b"GPU \xed\xa0\x80"), "not valid JSON", "UTF-8")  # a surrogate, raw


def _cheaply_refused(document: bytes, *words: str) -> None:
    """Refused with a sentence before parsing: Python allocates next to nothing for it."""
    tracemalloc.start()
    try:
        _refused(document, *words)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, f"refusing it took {peak / 2**20:.0f} MB"


def _filled(unit: bytes, head: bytes = b"[", tail: bytes = b"]") -> bytes:
    return head + unit * (FILL // len(unit)) + tail


@pytest.mark.parametrize("case,words", [
    ("nested lists", ["lists and objects", "1,000,000"]),
    ("nested lists in an object", ["lists and objects"]),
    ("zeros", ["commas", "5,000,000"]),
    ("deep nesting", ["lists and objects"]),
])
def test_files_that_would_cost_gigabytes_to_parse_are_refused_before_parsing(case, words):
    document = {
        "nested lists": lambda: _filled(b"[],") + b"[]",
        "nested lists in an object": lambda: _filled(b"[],", b'{"a":[') + b"[]]}",
        "zeros": lambda: _filled(b"0,") + b"0",
        "deep nesting": lambda: b"[" * FILL,
    }[case]()
    _cheaply_refused(document, *words)


@pytest.mark.parametrize("text", ["x", "\u00e9\u4e2d\U0001F600"])
def test_a_63_mb_string_is_refused_before_parsing(data, text):
    document = _edited(data, lambda d: d["lanes"][0].update(name="LONG")).encode()
    long = (text * (FILL // len(text.encode()))).encode()
    _cheaply_refused(document.replace(b"LONG", long), "string of", "262,144")


def test_many_long_messages_are_refused_before_parsing(data):
    notes = [{"category": "UserWarning", "message": "w" * 200_000, "batch": 0, "count": 1}] * 100
    _cheaply_refused(_edited(data, lambda d: d["warnings"].extend(notes)).encode(), "strings hold", "16,777,216")


def test_much_non_ascii_text_is_refused(data):
    names = ["\u00e9" * 100] * 1_000  # 200,000 bytes of UTF-8 in short strings
    document = json.dumps({**data, "threads": data["threads"] + names}, ensure_ascii=False).encode()
    _refused(document, "non-ASCII", "65,536")


def test_the_largest_trace_a_run_makes_loads():
    """10,000 batches of 100 rows on 16 devices: 190,000 spans, each replica on a thread of its own as in a
    real run, within every bound with room to spare."""
    trace = synthetic(RunConfig(data_size=1_000_000, batch_size=100, gpus=16, input_size=16))
    spans = [dataclasses.replace(s, thread=f"Thread-{n} (worker)") if s.phase == "forward" else s
             for n, s in enumerate(trace.spans)]
    document = trace_json.dumps(dataclasses.replace(trace, spans=spans)).encode()
    loaded = trace_json.loads(document)
    assert len(loaded.spans) == 190_000 and len(loaded.batches) == 10_000


DDP_CASES = 60


def test_mutated_ddp_traces_are_refused_with_a_sentence_or_draw_every_view():
    """The same generator on real DistributedDataParallel traces: a DDP trace that loads must draw too."""
    import random
    import traceback

    from ddp_traces import CONFIGS, ddp_document
    from fuzz_uploads import mutate

    for name in CONFIGS:  # the unchanged files first: each loads and draws
        draw_everything(trace_json.loads(ddp_document(name)), report=True)
    tally = Tally()
    for index in range(DDP_CASES):
        rng = random.Random(f"ddp-{SEED}-{index}")
        doc = json.loads(ddp_document(rng.choice(list(CONFIGS))))
        changes = [mutate(doc, rng) for _ in range(rng.choice([1, 1, 2]))]
        where = f"ddp case {index} ({'; '.join(changes)})"
        try:
            trace = trace_json.loads(json.dumps(doc))
        except TraceError as error:
            tally.rejected += 1
            if not one_sentence(str(error)):
                tally.failures.append(f"{where}: the refusal is not one sentence: {str(error)[:300]!r}")
            continue
        try:
            draw_everything(trace, every=False, report=index % REPORT_EVERY == 0)
            tally.drawn += 1
        except Exception:
            tally.failures.append(f"{where}: a view raised\n{traceback.format_exc(limit=-4)}")
    assert not tally.failures, "\n\n".join(tally.failures)
    assert tally.rejected + tally.drawn == DDP_CASES


FIELD_CASES = 12  # per engine: bench/fuzz_uploads.py runs hundreds


def test_one_field_off_of_every_engines_run_is_refused_or_draws():
    """A real run of each engine with one field changed, removed or retyped: refused with one sentence, or every
    view draws or says in one sentence what the file lacks for it."""
    from fuzz_uploads import judge
    from field_cases import RUNS, field_cases

    tallies = {engine: Tally() for engine in RUNS}
    for engine, where, text in field_cases(SEED, FIELD_CASES):
        judge(text, where, tallies[engine], lambda trace: draw_everything(trace, every=False, report=False))
    assert not [f for t in tallies.values() for f in t.failures], "\n\n".join(f for t in tallies.values() for f in t.failures)
    assert all(t.rejected + t.drawn == FIELD_CASES for t in tallies.values())


def _lacking(engine: str, run: int, edit) -> tuple:
    """An engine's run with `edit` made to its file, loaded: its views and what each lacks."""
    from field_cases import documents
    from dpviz.figures.views import views_of

    trace = trace_json.loads(_edited(json.loads(documents(engine)[run]), edit))
    draw_everything(trace, every=False, report=True)  # every other view draws, the report leaves the lacking out
    return {view.key: view.lacks(trace) for view in views_of(trace) if view.shows(trace)}


def test_a_dataparallel_file_without_arguments_says_so_in_the_inputs_view():
    lacking = _lacking("dp", 1, lambda d: d.update(arguments=[]))  # kwargs-small-batch, a failing run
    assert one_sentence(lacking["inputs"]) and "records no replica's arguments" in lacking["inputs"]
    assert [key for key, said in lacking.items() if said] == ["inputs"]


def test_a_pipeline_file_without_its_activations_says_so_in_the_memory_view():
    lacking = _lacking("pipeline", 0, lambda d: d["facts"].pop("flight"))
    assert one_sentence(lacking["memory"]) and "facts 'flight'" in lacking["memory"]
    assert [key for key, said in lacking.items() if said] == ["memory"]


def test_a_ddp_step_numbered_out_of_place_is_refused():
    from field_cases import documents

    _refused(_edited(json.loads(documents("ddp")[1]), lambda d: d["batches"][1].update(index=2)), "batch 1 is numbered 2")


@pytest.mark.parametrize("engine", ["ddp", "fsdp"])
def test_a_file_whose_spans_call_their_group_bucket_still_loads_and_draws(engine):
    """Files written before a span's group was named for every engine call it "bucket", in the same place."""
    from field_cases import documents

    text = documents(engine)[0]
    data = json.loads(text)
    fields = data["span_fields"]
    assert "bucket" not in fields and any(row[fields.index("group")] is not None for row in data["spans"])
    fields[fields.index("group")] = "bucket"
    loaded = trace_json.loads(json.dumps(data))
    assert loaded == trace_json.loads(text)
    assert trace_json.dumps(loaded) == text  # saved again, it names the group
    draw_everything(loaded, every=False, report=True)
