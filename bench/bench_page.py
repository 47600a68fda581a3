"""How fast the page reruns after a control changes, and how much figure data it sends.

    .venv/bin/python bench/bench_page.py
    .venv/bin/python bench/bench_page.py --quick      # the tutorial configuration only

Drives app.py in-process with Streamlit's AppTest (the same script run a browser triggers, without
the network), so every time here is script time. For both configurations (the tutorial's, and data
size 1,000,000 in batches of 256 on 16 devices) it times: the first run, a rerun after changing the
number of GPUs (the large one: the seed) so that a new run is recorded, a rerun after changing back
(served from the session's runs), a rerun after moving the first tab's batch slider (One step's: figures only), and showing each other tab
once (its view is built when first shown). For the tutorial's it then times new runs, each changing
one control from the run before (the number of GPUs, the batch size, the model: every one a
configuration the session has not run), and prints their median. It also prints the size of each
tab's plotly figures, which is what a browser must download and draw.

Baselines from the same run, since a shared machine's speed varies: a minimal page's rerun (one
plotly chart of a new torch tensor: the least a rerun that redraws can cost), timed right after each
of the tutorial's new runs, and for the large configuration the bare forwards of the same chunks
(the tutorial's model called on each of the 62,512 chunks one after another, no DataParallel, no page).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # results.py beside this script

from streamlit.testing.v1 import AppTest

from results import results

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {
    "tutorial (batch 30, data 100, 2 GPUs)": {},
    "large (batch 256, data 1,000,000, 16 GPUs)": {"batch_size": "256", "data_size": "1000000", "gpus": "16"},
}
# New runs at the tutorial's settings, one control changed each time; no two alike, none the first.
NEW_RUNS = [("gpus", 3), ("gpus", 4), ("gpus", 6), ("batch_size", 20), ("batch_size", 25), ("batch_size", 50),
            ("model", "mlp"), ("model", "counter"), ("model", "loss"), ("gpus", 5), ("batch_size", 10), ("model", "linear")]


def timed(step) -> float:
    start = time.perf_counter()
    app = step()
    elapsed = time.perf_counter() - start
    if app.exception:
        sys.exit(f"the page raised: {app.exception[0].value}")
    return elapsed


MINIMAL_PAGE = '''import plotly.graph_objects as go
import streamlit as st
import torch

n = st.slider("n", 1, 100, 3, key="n")
st.plotly_chart(go.Figure(go.Bar(y=torch.arange(n).tolist())))
'''


class MinimalPage:
    """A minimal page, rerun on demand: `rerun()` changes its one control and returns the script time."""

    def __init__(self, folder: str):
        script = Path(folder) / "minimal_page.py"
        script.write_text(MINIMAL_PAGE)
        self.app = AppTest.from_file(str(script), default_timeout=600)
        self.app.run()
        self.n = 3

    def rerun(self) -> float:
        self.n = self.n % 100 + 1
        return timed(lambda: self.app.slider(key="n").set_value(self.n).run())


def bare_chunks(query: dict[str, str]) -> float:
    """Seconds to call the configuration's model on every chunk of every batch, one after another."""
    import torch

    sys.path.insert(0, str(ROOT))
    from dpviz import RunConfig
    from dpviz.engines.workload import tutorial_data as tutorial

    config = RunConfig(**{name: int(value) for name, value in query.items()})
    model, loader = tutorial.build(config)
    batches = [data for data, _ in loader]
    start = time.perf_counter()
    with torch.enable_grad():
        for data in batches:
            for chunk in data.chunk(config.gpus):
                model(chunk)
    return time.perf_counter() - start


def figure_bytes(app: AppTest) -> list[int]:
    return [len(chart.proto.spec) for chart in app.get("plotly_chart")]


def control(app: AppTest, name: str):
    widgets = {"gpus": app.slider, "batch_size": app.number_input, "model": app.selectbox}
    return widgets[name](key=name)


def new_runs(app: AppTest, minimal: MinimalPage) -> tuple[list[tuple[str, float]], list[float]]:
    """Script time of each new run in NEW_RUNS, each followed by a minimal page's rerun (the baseline,
    interleaved so that both see the machine alike)."""
    runs, baseline = [], []
    for name, value in NEW_RUNS:
        runs.append((f"{name}={value}", timed(lambda: control(app, name).set_value(value).run())))
        baseline.append(minimal.rerun())
    return runs, baseline


def tabs(app: AppTest) -> list[tuple[str, float, list[int]]]:
    """Each tab shown once after the first: (label, script time, its figures' sizes); the first again last."""
    labels = [t.label for t in app.tabs]
    shown = []
    for label in labels[1:] + labels[:1]:
        app.session_state["tab"] = label
        shown.append((label, timed(app.run), figure_bytes(app)))
    return shown


def measure(name: str, query: dict[str, str], minimal: MinimalPage, figures: dict) -> None:
    """Time one configuration's page: first run, new run, back, slider, new runs (tutorial), each tab; the
    figures also go into `figures`."""
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    for key, value in query.items():
        app.query_params[key] = value
    first = timed(app.run)
    print(f"{name}:")
    # A new run: the tutorial's on another number of GPUs; the large one with another seed, so its
    # chunks are the baseline's. Then back (from the session's runs), then the first tab's (One step's) slider.
    setting, widget = ("gpus", app.slider) if not query else ("seed", app.number_input)
    before = widget(key=setting).value
    after = (8 if before != 8 else 4) if not query else before + 1
    changed = timed(lambda: widget(key=setting).set_value(after).run())
    back = timed(lambda: widget(key=setting).set_value(before).run())
    batch = app.slider(key="one_step_batch") if any(s.key == "one_step_batch" for s in app.slider) else None
    moved = timed(lambda: batch.set_value(0).run()) if batch is not None else float("nan")
    print(f"  first run {first:6.2f} s | {setting} {before}->{after} (new run) {changed:6.2f} s | "
          f"back to {before} (from memory) {back:6.2f} s | first tab's batch slider {moved:6.2f} s")
    figures.update(first_run_s=first, new_run_s=changed, new_run_change=f"{setting} {before} to {after}",
                   back_s=back, slider_s=moved)
    if not query:
        runs, baseline = new_runs(app, minimal)
        median, least = statistics.median(t for _, t in runs), statistics.median(baseline)
        print(f"  new runs, one control changed each: median {median:.3f} s; a minimal page's rerun, between "
              f"them: median {least:.3f} s ({median / least:.1f}x)")
        print("  each new run: " + ", ".join(f"{label} {t:.2f}" for label, t in runs))
        figures.update(new_runs_median_s=median, new_runs_least_s=min(t for _, t in runs),
                       new_runs_most_s=max(t for _, t in runs), minimal_rerun_median_s=least, new_runs=len(runs))
    else:
        bare = bare_chunks(query)
        print(f"  baseline: bare forwards of the same chunks {bare:.2f} s; the new run {changed / bare:.1f}x, "
              f"the first run (imports included) {first / bare:.1f}x")
        figures.update(bare_chunks_s=bare, new_run_ratio=changed / bare, first_run_ratio=first / bare)
    shown = tabs(app)
    print("  each tab shown once: " + ", ".join(f"{label} {t:.2f} s" for label, t, _ in shown))
    sizes = [size for _, _, sent in shown for size in sent]
    print(f"  {len(sizes)} figures over the tabs, {sum(sizes) / 1024:,.0f} KiB in all, "
          f"largest {max(sizes) / 1024:,.0f} KiB; a tab sends only its own")
    figures.update(tabs_least_s=min(t for _, t, _ in shown), tabs_most_s=max(t for _, t, _ in shown),
                   figure_count=len(sizes), figures_kib=sum(sizes) / 1024, largest_figure_kib=max(sizes) / 1024)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the tutorial configuration only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        minimal = MinimalPage(folder)
        for index, (name, query) in enumerate(CONFIGS.items()):
            if args.quick and index > 0:
                break
            with results("bench_page", "tutorial" if not query else "large") as figures:
                measure(name, query, minimal, figures)


if __name__ == "__main__":
    main()
