"""Readers of a trace depend only on the trace: loading, checking, drawing, summarising, explaining and
exporting import no torch and nothing of the recording side (checked in a fresh interpreter, where nothing
is imported yet, and in one where torch cannot be imported at all)."""
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from dpviz.trace import json_io as trace_json
from dpviz.config import RunConfig
from dpviz.engines import ENGINES, engine
from dpviz.figures.views import VIEWS
from dpviz.presets import DDP_PRESETS, PRESETS
from ddp_traces import ddp_document, record_config
from figure_traces import recorded, synthetic

ROOT = Path(__file__).resolve().parents[1]
# What runs a model, starts its processes or builds its tensors: every module here imports torch, or is
# reached only from one that does. Reading a trace needs none of them.
RECORDING_SIDE = sorted({
    *(f"dpviz.engines.workload.{name}" for name in
      ("tutorial_data", "batch_sampler", "input_forms", "models", "seeding", "warning_capture", "own", "memory",
       "shapes", "tensor_shape", "units", "precision", "declared", "counted_once")),
    *(f"dpviz.engines.dp.{name}" for name in
      ("engine", "devices", "recorder", "observer", "simulated", "scatter", "workers", "ledger")),
    *(f"dpviz.engines.ddp.{name}" for name in
      ("engine", "rank", "observer", "merge")),
    *(f"dpviz.engines.zero1.{name}" for name in ("engine", "sharded", "rank")),
    *(f"dpviz.engines.ranks.{name}" for name in ("launch", "torchrun", "program")),
    *(f"dpviz.engines.fsdp.{name}" for name in ("engine", "wrapping", "rank", "merge", "on_mesh")),
    *(f"dpviz.engines.pipeline.{name}" for name in ("engine", "rank", "observer", "merge", "stages")),
    *(f"dpviz.engines.tp.{name}" for name in ("engine", "parallel", "rank", "merge")),
})
# Each engine's readers: every module of its read/ subpackage (key figures, explanations, log, exports, views).
READERS = sorted(".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                 for path in (ROOT / "dpviz" / "engines").glob("*/read/*.py"))
# What a reader may import of an engine's package: its readers, its spec, its words, its arithmetic, the facts
# of a loaded trace and its check.
READING_SIDE = sorted({
    *READERS,
    *(f"dpviz.engines.dp.{name}" for name in ("spec", "vocabulary", "options", "chunking", "split_rules", "facts", "check",
                                              "plan")),
    *(f"dpviz.engines.ddp.{name}" for name in ("spec", "vocabulary", "options", "sampler_rows", "facts", "check", "plan")),
    *(f"dpviz.engines.zero1.{name}" for name in ("spec", "vocabulary", "check", "plan")),
    *(f"dpviz.engines.fsdp.{name}" for name in ("spec", "vocabulary", "options", "check", "facts", "plan", "mesh")),
    *(f"dpviz.engines.pipeline.{name}" for name in ("spec", "vocabulary", "options", "layers", "check", "facts", "plan")),
    *(f"dpviz.engines.tp.{name}" for name in ("spec", "vocabulary", "options", "check", "facts", "plan")),
})
LOADED = f"""
def loaded():
    return sorted(m for m in sys.modules
                  if (sys.modules[m] is not None and (m == "torch" or m.startswith("torch."))) or m in {RECORDING_SIDE!r})
"""

SCRIPT = f"""
import sys
sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / "tests")!r}]
import dpviz.figures, dpviz.analysis.summary, dpviz.analysis.explain, dpviz.exports.chrome_trace, dpviz.exports.tutorial_log, dpviz.trace.json_io
from dpviz import RunConfig, figures
from dpviz.exports import chrome_trace
from dpviz.exports import tutorial_log
from dpviz.analysis.explain import explain
from dpviz.analysis.summary import key_figures, summary_table
from figure_traces import synthetic
{LOADED}
print("after import:", loaded())
trace = synthetic(RunConfig(gpus=4, data_size=100, batch_size=30, train=True))
for batch in range(len(trace.batches)):
    figures.flow_figure(trace, batch)
figures.split_figure(trace); figures.timeline_figure(trace); figures.sample_map_figure(trace); figures.step_figure(trace)
key_figures(trace); summary_table(trace); explain(trace); figures.html_report(trace)
chrome_trace.dumps(trace); tutorial_log.tutorial_log(trace)
print("after drawing:", loaded())
"""


def test_drawing_a_trace_imports_no_torch_and_nothing_of_the_recording_side():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["after import: []", "after drawing: []"]


# A fresh interpreter in which `import torch` raises ImportError: it loads every trace file in a folder
# (each checked as an upload is), draws every view of the trace's engine in every way the page asks for
# it, builds every export, and prints, per file, the views it drew and whether the file reads back as
# written; then what it imported of torch and the recording side.
WITHOUT_TORCH = f"""
import sys
sys.modules["torch"] = None  # any import of torch, however deep, now raises ImportError
sys.path[:0] = [{str(ROOT)!r}]
import json
from pathlib import Path
from dpviz.exports import chrome_trace
from dpviz.trace import json_io as trace_json
from dpviz.exports import tutorial_log
from dpviz.analysis.explain import explain
from dpviz.figures import html_report
from dpviz.figures.views import BATCH, SAMPLED, TEXT, VIEWS, WHOLE, WINDOW
from dpviz.analysis.summary import key_figures, summary_table
import importlib
for module in {READERS!r}:  # every engine's readers import without torch, whether a trace needs them or not
    importlib.import_module(module)
{LOADED}

def draw(view, trace):
    batches = len(trace.batches)
    if view.control in (WHOLE, TEXT):
        view.build(trace)
    elif view.control == BATCH:
        for batch in range(batches):
            view.build(trace, batch)
    elif view.control == SAMPLED:
        for batch in view.sampled(trace):
            view.build(trace, batch)
    elif view.control == WINDOW:
        for first in range(0, batches, view.window(trace)):
            view.build(trace, first)
        if view.detail is not None:
            for first in range(0, batches, view.detail_window):
                view.detail(trace, first)
    else:
        raise AssertionError(view.control)
    view.figures_for_report(trace)

for path in sorted(Path(sys.argv[1]).glob("*.json")):
    text = path.read_text()
    trace = trace_json.loads(text)
    drawn = []
    for view in VIEWS:
        if trace.engine in view.engines:
            draw(view, trace)
            drawn.append(view.key)
    key_figures(trace); summary_table(trace); explain(trace); html_report(trace)
    chrome_trace.dumps(trace); tutorial_log.tutorial_log(trace)
    print(json.dumps([path.stem, trace.engine, drawn, trace_json.dumps(trace) == text]))
print(json.dumps(["loaded", loaded()]))
print(json.dumps(["engines", sorted(m for m in sys.modules if m.startswith("dpviz.engines.") and m.count(".") == 3)]))
"""


def trace_files(folder: Path) -> dict[str, str]:
    """Trace files of both engines in `folder`, recorded here (with torch): name -> engine."""
    traces = {"dp-synthetic": synthetic(dataclasses.replace(PRESETS["idle-gpus"].config, backend="simulated",
                                                            train=True))}
    for name, preset in PRESETS.items():  # DataParallel's pitfalls: failures, arguments, memory, losses, state
        traces[f"dp-{name}"] = recorded(**{**preset.config.to_dict(), "backend": "simulated"})
    for name, preset in DDP_PRESETS.items():
        if name != "ddp-uneven":  # it waits out a 3-second timeout; ddp-unused-parameter fails too
            traces[f"ddp-{name}"] = record_config(dataclasses.replace(preset.config, backend="cpu"))
    # ZeRO-1 with Adam over the MLP in several buckets: its shards of the optimizer's state, DDP's views.
    traces["zero1-adam"] = engine("zero1").record(RunConfig(engine="zero1", gpus=2, train=True, optimizer="adam",
                                                            model="mlp", bucket_cap_mb=0.0002, data_size=60))
    # FSDP with Adam over the MLP: three sharded modules, each with its own spans; its shards of everything held.
    traces["fsdp-adam"] = engine("fsdp").record(RunConfig(engine="fsdp", gpus=2, train=True, optimizer="adam",
                                                          model="mlp", data_size=60))
    # A pipeline of 4 stages under 1F1B: every microbatch's passes and transfers, its layers and activations in flight.
    traces["pipeline-1f1b"] = engine("pipeline").record(RunConfig(engine="pipeline", gpus=4, train=True, model="transformer",
                                                                  schedule="1f1b", batch_size=32, data_size=96))
    # Tensor parallelism with Adam over the transformer: each block's all-reduces in forward and backward, its slices.
    traces["tp-adam"] = engine("tp").record(RunConfig(engine="tp", gpus=2, train=True, optimizer="adam",
                                                      model="transformer", data_size=16, batch_size=8))
    documents = {name: trace_json.dumps(trace) for name, trace in traces.items()}
    documents["ddp-four_train"] = ddp_document("four_train")  # several buckets
    documents["ddp-two_accumulate"] = ddp_document("two_accumulate")  # no_sync steps
    for name, text in documents.items():
        (folder / f"{name}.json").write_text(text)
    return {name: json.loads(text)["engine"] for name, text in documents.items()}


def test_loading_and_reading_every_engines_trace_needs_no_torch(tmp_path):
    engines = trace_files(tmp_path)
    assert set(engines.values()) == set(ENGINES)
    result = subprocess.run([sys.executable, "-c", WITHOUT_TORCH, str(tmp_path)], capture_output=True, text=True,
                            cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    *per_file, (_, imported), (_, engine_modules) = [json.loads(line) for line in result.stdout.splitlines()]
    assert imported == []
    assert engine_modules and set(engine_modules) <= set(READING_SIDE)
    assert {f"dpviz.engines.{name}.check" for name in ENGINES} <= set(engine_modules)
    assert {name: engine for name, engine, _, _ in per_file} == engines
    for name, engine, drawn, same in per_file:
        assert drawn == [view.key for view in VIEWS if engine in view.engines], name
        assert same, f"{name} does not read back as written"


def test_every_engine_module_is_on_one_side():
    """A new module of an engine is either recording (torch) or reading (no torch): the lists above say which."""
    modules = {f"dpviz.engines.{path.parent.name}.{path.stem}" for engine in (*ENGINES, "workload", "ranks")
               for path in (ROOT / "dpviz" / "engines" / engine).glob("*.py") if path.stem != "__init__"}
    modules |= set(READERS)
    assert len(READERS) > 30 and all(f"dpviz.engines.{name}.read" in READERS for name in ENGINES)
    assert modules == {m for m in RECORDING_SIDE + READING_SIDE if m.startswith("dpviz.engines.")}
