"""The page's server never imports torch: every run, DataParallel's included, happens in a process of its own
(dpviz.engines.apart), and what comes back is plain data. Checked in a fresh interpreter that serves every kind of
page (each engine, Both, Memory, a pitfall whose run fails) through Streamlit's AppTest, then looks at sys.modules."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from budget import limit

ROOT = Path(__file__).resolve().parents[1]
PAGES = [{}, {"gpus": "16", "data_size": "3000", "batch_size": "30"}, {"engine": "ddp", "gpus": "2", "train": "true"},
         {"engine": "zero1", "gpus": "2", "train": "true", "optimizer": "adam"},
         {"engine": "fsdp", "gpus": "2", "train": "true", "model": "transformer"}, {"engine": "both", "gpus": "2"},
         {"engine": "memory", "gpus": "2", "train": "true"}, {"preset": "ddp-unused-parameter"},
         {"preset": "rnn-hidden-dim"}]
SERVE = f"""
import sys
from streamlit.testing.v1 import AppTest
for query in {PAGES!r}:
    app = AppTest.from_file("app.py", default_timeout=600)
    for name, value in query.items():
        app.query_params[name] = value
    app.run()
    assert not app.exception, (query, [e.value for e in app.exception])
    assert app.get("plotly_chart"), query
    print("drawn", query, flush=True)
print("torch imported:", "torch" in sys.modules)
"""


def test_every_kind_of_page_is_served_without_torch_in_the_server():
    # The work: this interpreter, then the forkserver (which imports torch), then the pages' runs, each within
    # its collective timeout.
    out = subprocess.run([sys.executable, "-c", SERVE], cwd=ROOT, capture_output=True, text=True,
                         timeout=limit(starts=2, then_s=len(PAGES) * 30))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("drawn") == len(PAGES)
    assert "torch imported: False" in out.stdout
