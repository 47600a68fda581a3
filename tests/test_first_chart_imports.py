"""The page's first chart waits only for what it draws with: pandas (about half a second to import, more
than the run and the chart together) is loaded after the first chart, by the key figures below it."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# What the page does before its first chart, in a fresh interpreter: import the page's module, run the
# tutorial, ask whether it has a pitfall tab (it does not), draw its Flow; then what comes below it.
FIRST_SCREEN = """
import sys
import app
from dpviz import RunConfig, record
from dpviz.figures.views import VIEWS

trace = record(RunConfig())
tabs = [view.tab for view in VIEWS if view.shows(trace)]
flow = next(view for view in VIEWS if view.tab == tabs[0])
figure = flow.build(trace, len(trace.batches) - 1)
print(tabs[0], figure.layout.title.text.split("<br>")[0], "pandas" in sys.modules)
from dpviz.summary import key_figures
key_figures(trace)
print("pandas" in sys.modules)
"""


def test_the_first_chart_is_drawn_before_pandas_is_imported():
    done = subprocess.run([sys.executable, "-c", FIRST_SCREEN], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    first, after = done.stdout.strip().splitlines()[-2:]
    assert first == "Flow Batch 3 of 4: 10 rows scattered over 2 of 2 GPUs False"
    assert after == "True"  # the key figures' tables still come from pandas: the check above can fail
