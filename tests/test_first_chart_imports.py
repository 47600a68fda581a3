"""A DataParallel run's first screen waits only for what it draws with: pandas (about half a second to
import, more than the run and the chart together) is loaded when a view drawn from its tables is shown."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# What the page does for its first screen, in a fresh interpreter: import the page's module, run the
# tutorial, ask whether it has a pitfall tab (it does not), draw its One step, the key figures and the
# explanations under it; then another tab's view, drawn from a DataFrame.
FIRST_SCREEN = """
import re
import sys
import app
from dpviz import RunConfig, record
from dpviz.figures.views import VIEWS

trace = record(RunConfig())
tabs = [view.tab for view in VIEWS if view.shows(trace)]
flow = next(view for view in VIEWS if view.tab == tabs[0])
figure = flow.build(trace, len(trace.batches) - 1)
print(tabs[0], "|", re.sub(r"<br\s*/?>", " ", figure.layout.title.text), "|", "pandas" in sys.modules)
from dpviz.analysis.explain import explain
from dpviz.analysis.summary import key_figures
print(len(key_figures(trace)), len(explain(trace)) > 3, "pandas" in sys.modules)
# Nor the other views' code, nor DDP's summary and explanations.
print(sorted(m for m in ("dpviz.figures.split", "dpviz.figures.timeline", "dpviz.figures.memory", "dpviz.figures.report",
                         "dpviz.engines.ddp.read.summary", "dpviz.engines.ddp.read.explain", "dpviz.analysis.tables") if m in sys.modules))
next(view for view in VIEWS if view.tab == "Split").build(trace)
print("pandas" in sys.modules)
"""


def test_a_dataparallel_runs_first_screen_is_drawn_without_pandas():
    done = subprocess.run([sys.executable, "-c", FIRST_SCREEN], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    chart, below, loaded, split = done.stdout.strip().splitlines()[-4:]
    assert chart == "One step | Batch 4 of 4: every copy leaves from GPU 0 and comes back to it | False"
    assert below == "8 True False"  # eight key figures (memory peak and its ratio too), the explanations
    assert loaded == "[]"
    assert split == "True"  # the Split view's table is a DataFrame: the checks above can fail
