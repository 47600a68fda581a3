"""How fast the page reruns after a control changes, and how much figure data it sends.

    .venv/bin/python bench/bench_page.py
    .venv/bin/python bench/bench_page.py --quick      # the tutorial configuration only

Drives app.py in-process with Streamlit's AppTest (the same script run a browser triggers, without
the network), so every time here is script time. For both configurations (the tutorial's, and data
size 1,000,000 in batches of 256 on 16 devices) it times: the first run, a rerun after changing the
number of GPUs (a new run is recorded), a rerun after changing back (served from the session's
runs), a rerun after moving the Flow tab's batch slider (figures only), and showing each other tab
once (its view is built when first shown). For the tutorial's it then times new runs, each changing
one control from the run before (the number of GPUs, the batch size, the model: every one a
configuration the session has not run), and prints their median. It also prints the size of each
tab's plotly figures, which is what a browser must download and draw.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

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


def figure_bytes(app: AppTest) -> list[int]:
    return [len(chart.proto.spec) for chart in app.get("plotly_chart")]


def control(app: AppTest, name: str):
    widgets = {"gpus": app.slider, "batch_size": app.number_input, "model": app.selectbox}
    return widgets[name](key=name)


def new_runs(app: AppTest) -> list[tuple[str, float]]:
    """Script time of each new run in NEW_RUNS."""
    return [(f"{name}={value}", timed(lambda: control(app, name).set_value(value).run())) for name, value in NEW_RUNS]


def tabs(app: AppTest) -> list[tuple[str, float, list[int]]]:
    """Each tab shown once after the first: (label, script time, its figures' sizes); the first again last."""
    labels = [t.label for t in app.tabs]
    shown = []
    for label in labels[1:] + labels[:1]:
        app.session_state["tab"] = label
        shown.append((label, timed(app.run), figure_bytes(app)))
    return shown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the tutorial configuration only")
    args = parser.parse_args()
    for index, (name, query) in enumerate(CONFIGS.items()):
        if args.quick and index > 0:
            break
        app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
        for key, value in query.items():
            app.query_params[key] = value
        first = timed(app.run)
        print(f"{name}:")
        gpus = app.slider(key="gpus").value
        other = 8 if gpus != 8 else 4
        changed = timed(lambda: app.slider(key="gpus").set_value(other).run())
        back = timed(lambda: app.slider(key="gpus").set_value(gpus).run())
        batch = app.slider(key="flow_batch") if any(s.key == "flow_batch" for s in app.slider) else None
        moved = timed(lambda: batch.set_value(0).run()) if batch is not None else float("nan")
        print(f"  first run {first:6.2f} s | GPUs {gpus}->{other} (new run) {changed:6.2f} s | "
              f"back to {gpus} (from memory) {back:6.2f} s | flow batch slider {moved:6.2f} s")
        if not query:
            runs = new_runs(app)
            print(f"  new runs, one control changed each: median {statistics.median(t for _, t in runs):.3f} s "
                  f"(" + ", ".join(f"{label} {t:.2f}" for label, t in runs) + ")")
        shown = tabs(app)
        print("  each tab shown once: " + ", ".join(f"{label} {t:.2f} s" for label, t, _ in shown))
        sizes = [size for _, _, figures in shown for size in figures]
        print(f"  {len(sizes)} figures over the tabs, {sum(sizes) / 1024:,.0f} KiB in all, "
              f"largest {max(sizes) / 1024:,.0f} KiB; a tab sends only its own")


if __name__ == "__main__":
    main()
