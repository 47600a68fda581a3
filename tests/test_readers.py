"""Readers of a trace depend only on the trace: drawing, summarising, explaining and exporting import no
torch and nothing of the recording side (checked in a fresh interpreter, where nothing is imported yet)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDING_SIDE = ("recorder", "observer", "simulated", "scatter", "memory", "check", "engine")

SCRIPT = f"""
import sys
sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / "tests")!r}]
import dpviz.figures, dpviz.summary, dpviz.explain, dpviz.chrome_trace, dpviz.tutorial_log, dpviz.trace_json
from dpviz import RunConfig, chrome_trace, figures, tutorial_log
from dpviz.explain import explain
from dpviz.summary import key_figures, summary_table
from figure_traces import synthetic

def loaded():
    return sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")
                  or m.startswith("dpviz.engines.dp.") and m.rsplit(".", 1)[1] in {RECORDING_SIDE!r})

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
