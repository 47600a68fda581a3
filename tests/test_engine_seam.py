"""The engine seam: what differs between engines is declared by each engine and looked up in the registry.

Nothing outside dpviz/engines/ compares an engine's name; and an engine added as one folder plus one entry in
the registry is offered by the config, the links, the command line and the page, loads from a file, reads its
traces with its own readers, and draws every view its spec names, its own view too, with no other file touched."""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from dpviz.engines import ENGINES

from budget import limit
from ddp_traces import ddp_document

ROOT = Path(__file__).resolve().parents[1]


def _literals(node: ast.AST) -> list[str]:
    """The string constants of a comparison's operand, inside a tuple, list or set too."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [value for element in node.elts for value in _literals(element)]
    return []


def name_comparisons(path: Path) -> list[str]:
    """Every place in `path` that compares with an engine's name, or keys a dict literal by one."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.Dict):
            operands = [key for key in node.keys if key is not None]
        else:
            continue
        names = [value for operand in operands for value in _literals(operand) if value in ENGINES]
        if names:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)[:100]}")
    return found


def test_nothing_outside_the_engines_compares_an_engine_name():
    files = [ROOT / "app.py", *(p for p in (ROOT / "dpviz").rglob("*.py") if "engines" not in p.relative_to(ROOT).parts)]
    assert len(files) > 40
    found = [place for path in files for place in name_comparisons(path)]
    assert found == []
    # The scan itself finds what it looks for.
    probe = ROOT / "dpviz" / "engines" / "dp" / "engine.py"
    assert not name_comparisons(probe)
    sample = Path(os.environ.get("TMPDIR", "/tmp")) / f"seam-probe-{os.getpid()}.py"
    sample.write_text('if trace.engine == "ddp": pass\nx = {"dp": 1}\ny = engine in ("dp", "ddp")\n')
    try:
        assert len(ast.parse(sample.read_text()).body) == 3
        assert [place.split(": ", 1)[1] for place in _scan(sample)] == [
            "trace.engine == 'ddp'", "{'dp': 1}", "engine in ('dp', 'ddp')"]
    finally:
        sample.unlink()


def _scan(path: Path) -> list[str]:
    global ROOT
    saved, ROOT = ROOT, path.parent
    try:
        return name_comparisons(path)
    finally:
        ROOT = saved


# A fifth engine, one folder: it records on DDP's processes (its spec names DDP's rank program and engine), but
# reads its traces its own way: its own key figures, What happened, report heading and command-line line, and a
# view of its own (how many spans each rank recorded), placed after Split. What the next engine adds.
TOY_FILES = {
    "__init__.py": '"""A fifth engine: on the processes of DDP, with readers and a view of its own."""\n',
    "spec.py": '''
import dataclasses
from dpviz.engines.ddp.spec import SPEC as DDP
from dpviz.engines.parts import View

SPEC = dataclasses.replace(
    DDP, name="toy", label="Toy Parallel", short="Toy", runs="toy.Parallel", title="How Toy Parallel shares the work",
    parts=dataclasses.replace(
        DDP.parts,
        summary="dpviz.engines.toy.read.words:key_figures",
        summary_rows="dpviz.engines.toy.read.words:rows",
        explain="dpviz.engines.toy.read.words:explain",
        report_heading="dpviz.engines.toy.read.words:heading",
        outcome="dpviz.engines.toy.read.words:outcome",
        own_views=(View("spans", "Spans per rank", "dpviz.engines.toy.read.spans:spans_figure", after="split"),),
    ),
)
''',
    "read/__init__.py": '"""What a Toy Parallel trace says (no torch)."""\n',
    "read/words.py": '''
import sys


def key_figures(trace):
    return {"Toy ranks": f"{len(trace.lanes)}", "Toy steps": f"{len(trace.batches)}"}


def rows(trace):
    return list(key_figures(trace).items())


def explain(trace):
    return [f"**Toy Parallel.** {len(trace.lanes)} toy ranks ran {len(trace.batches)} steps."]


def heading(trace):
    return f"Toy Parallel run on {len(trace.lanes)} toy ranks"


def outcome(trace, config, ranked):
    print(f"dpviz: Toy Parallel ran {len(trace.batches)} steps.", file=sys.stderr)
    return 0
''',
    "read/spans.py": '''
import plotly.graph_objects as go


def spans_figure(trace):
    counts = [sum(1 for s in trace.spans if s.lane == lane.id) for lane in trace.lanes]
    return go.Figure(go.Bar(x=[lane.name for lane in trace.lanes], y=counts), layout=dict(title="Spans per toy rank"))
''',
}

SCRIPT = r'''
import io, json, sys, contextlib
from dpviz.trace import json_io as trace_json
from dpviz.cli import build_parser
from dpviz.config import ENGINE_NAMES, RunConfig
from dpviz.engines.conformance import problems
from dpviz.page.link import from_query, to_query
from dpviz.figures.views import views_of
from dpviz.analysis.explain import explain
from dpviz.analysis.summary import key_figures, summary_table
from dpviz.exports.tutorial_log import tutorial_log
from dpviz.exports import chrome_trace
from dpviz.figures.report import html_report

assert ENGINE_NAMES[-1] == "toy", ENGINE_NAMES
config = RunConfig(engine="toy", gpus=2, train=True, bucket_cap_mb=0.0002)
assert config.num_batches == RunConfig(engine="ddp", gpus=2, train=True).num_batches
assert from_query(to_query(config)) == (config, []), from_query(to_query(config))
assert "toy, toy.Parallel" in " ".join(build_parser().format_help().split())
document = json.loads(open(sys.argv[1]).read())
document["engine"] = document["config"]["engine"] = "toy"
trace = trace_json.loads(json.dumps(document))
assert trace.spec.label == "Toy Parallel" and problems(trace.spec.parts) == [], problems(trace.spec.parts)
views = [view for view in views_of(trace) if view.draws(trace)]
keys = [view.key for view in views]
assert keys.index("spans") == keys.index("split") + 1 and "timeline" in keys, keys
assert all(view.figures_for_report(trace) for view in views), keys
assert key_figures(trace) == {"Toy ranks": "2", "Toy steps": str(len(trace.batches))}
assert list(summary_table(trace)["key figure"]) == ["Toy ranks", "Toy steps"]
assert explain(trace)[0].startswith("**Toy Parallel.** 2 toy ranks") and tutorial_log(trace)
assert json.loads(chrome_trace.dumps(trace))["traceEvents"]
report = html_report(trace)
assert "Toy Parallel run on 2 toy ranks" in report and "Spans per rank" in report and "Spans per toy rank" in report
err = io.StringIO()
with contextlib.redirect_stderr(err):
    assert trace.spec.part("outcome")(trace, trace.config, False) == 0
assert err.getvalue().startswith("dpviz: Toy Parallel ran"), err.getvalue()
# The page offers it, runs it on real processes (its recording is DDP's), and shows its own view's tab.
from streamlit.testing.v1 import AppTest
app = AppTest.from_file(sys.argv[2], default_timeout=float(sys.argv[3]))
for name, value in (("engine", "toy"), ("gpus", "2"), ("train", "true")):
    app.query_params[name] = value
app.run()
assert not app.exception, app.exception
assert app.header[0].value == "How Toy Parallel shares the work", app.header[0].value
assert app.radio(key="engine_choice").value == "toy" and app.get("plotly_chart")
assert app.query_params["engine"] == "toy"
tabs = [tab.label for tab in app.tabs]
assert "Spans per rank" in tabs and tabs.index("Spans per rank") == tabs.index("Split") + 1, tabs
print("ok", len(views))
'''


def test_a_new_engine_is_one_folder_and_one_registry_entry(tmp_path):
    copy = tmp_path / "dpviz"
    shutil.copytree(ROOT / "dpviz", copy, ignore=shutil.ignore_patterns("__pycache__"))
    folder = copy / "engines" / "toy"
    for name, text in TOY_FILES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    registry = copy / "engines" / "__init__.py"
    text = registry.read_text()
    entry = re.search(r"for spec in \(([^)]*)\)\}", text)
    assert entry and text.count(entry.group(0)) == 1 and "_DDP" in entry.group(1)
    registry.write_text(text.replace("from dpviz.engines.spec import",
                                     "from dpviz.engines.toy.spec import SPEC as _TOY\nfrom dpviz.engines.spec import")
                        .replace(entry.group(0), f"for spec in ({entry.group(1)}, _TOY)}}"))
    # Nothing else of the copy changed: the engine is its folder and the registry's one line.
    changed = [str(path.relative_to(copy)) for path in copy.rglob("*.py")
               if "toy" not in path.relative_to(copy).parts and (ROOT / "dpviz" / path.relative_to(copy)).read_text() != path.read_text()]
    assert changed == ["engines/__init__.py"]
    shutil.copy(ROOT / "app.py", tmp_path / "app.py")
    (tmp_path / "run.json").write_text(ddp_document("two_train"))
    page_s = limit(starts=3, then_s=60)  # the page's run starts a forkserver and two ranks, each importing torch
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "run.json"), str(tmp_path / "app.py"), str(page_s)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=page_s + limit(starts=1, then_s=60),
                          env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[0] == "ok"
