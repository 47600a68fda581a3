"""The engine seam: what differs between engines is declared by each engine and looked up in the registry.

Nothing outside dpviz/engines/ compares an engine's name; and an engine added as one package plus one
entry in the registry is offered by the config, the links, the command line and the page, loads from a
file, and draws in every view its spec names, with no other file touched."""
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


# A third engine that records as DistributedDataParallel does and is read by DDP's readers, under a name,
# labels and title of its own: what the next engine adds before it has views of its own.
TOY_SPEC = '''
import dataclasses
from dpviz.engines.ddp.spec import SPEC as DDP

SPEC = dataclasses.replace(DDP, name="toy", label="Toy Parallel", short="Toy", runs="toy.Parallel",
                           title="How Toy Parallel shares the work")
'''

SCRIPT = r'''
import json, sys
from dpviz.trace import json_io as trace_json
from dpviz.cli import build_parser
from dpviz.config import ENGINE_NAMES, RunConfig
from dpviz.page.link import from_query, to_query
from dpviz.figures.views import VIEWS
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
assert trace.spec.label == "Toy Parallel"
drawn = [view.key for view in VIEWS if view.draws(trace) and view.figures_for_report(trace)]
assert drawn == [view.key for view in VIEWS if view.draws(trace)] and "timeline" in drawn, drawn
assert key_figures(trace) and len(summary_table(trace)) and explain(trace) and tutorial_log(trace)
assert json.loads(chrome_trace.dumps(trace))["traceEvents"]
assert "Toy Parallel run" in html_report(trace)
# The page offers it, runs it on real processes (its recording is DDP's) and draws its first tab.
from streamlit.testing.v1 import AppTest
app = AppTest.from_file(sys.argv[2], default_timeout=float(sys.argv[3]))
for name, value in (("engine", "toy"), ("gpus", "2"), ("train", "true")):
    app.query_params[name] = value
app.run()
assert not app.exception, app.exception
assert app.header[0].value == "How Toy Parallel shares the work", app.header[0].value
assert app.radio(key="engine_choice").value == "toy" and app.get("plotly_chart")
assert app.query_params["engine"] == "toy"
print("ok", len(drawn))
'''


def test_a_new_engine_is_one_package_and_one_registry_entry(tmp_path):
    copy = tmp_path / "dpviz"
    shutil.copytree(ROOT / "dpviz", copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "engines" / "toy").mkdir()
    (copy / "engines" / "toy" / "__init__.py").write_text('"""A third engine."""\n')
    (copy / "engines" / "toy" / "spec.py").write_text(TOY_SPEC)
    registry = copy / "engines" / "__init__.py"
    text = registry.read_text()
    entry = re.search(r"for spec in \(([^)]*)\)\}", text)
    assert entry and text.count(entry.group(0)) == 1 and "_DDP" in entry.group(1)
    registry.write_text(text.replace("from dpviz.engines.spec import",
                                     "from dpviz.engines.toy.spec import SPEC as _TOY\nfrom dpviz.engines.spec import")
                        .replace(entry.group(0), f"for spec in ({entry.group(1)}, _TOY)}}"))
    shutil.copy(ROOT / "app.py", tmp_path / "app.py")
    (tmp_path / "run.json").write_text(ddp_document("two_train"))
    page_s = limit(starts=3, then_s=60)  # the page's run starts a forkserver and two ranks, each importing torch
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "run.json"), str(tmp_path / "app.py"), str(page_s)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=page_s + limit(starts=1, then_s=60),
                          env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[0] == "ok"
