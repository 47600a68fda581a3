"""How fast the page reruns after a control changes, and how much figure data it sends.

    .venv/bin/python bench/bench_page.py

Drives app.py in-process with Streamlit's AppTest (the same script run a browser triggers, without
the network) for the tutorial configuration and for data size 1,000,000 in batches of 256 on 16
devices. For each it times: the first run, a rerun after changing the number of GPUs (a new run is
recorded), a rerun after changing back (served from the session's runs), and a rerun after moving
the Flow tab's batch slider (figures only). It also prints the size of the plotly figures the page
sends, which is what a browser must download and draw.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {
    "tutorial (batch 30, data 100, 2 GPUs)": {},
    "large (batch 256, data 1,000,000, 16 GPUs)": {"batch_size": "256", "data_size": "1000000", "gpus": "16"},
}


def timed(step) -> float:
    start = time.perf_counter()
    app = step()
    elapsed = time.perf_counter() - start
    if app.exception:
        sys.exit(f"the page raised: {app.exception[0].value}")
    return elapsed


def figure_bytes(app: AppTest) -> list[int]:
    return [len(chart.proto.spec) for chart in app.get("plotly_chart")]


def main() -> None:
    for name, query in CONFIGS.items():
        app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
        for key, value in query.items():
            app.query_params[key] = value
        first = timed(app.run)
        gpus = app.slider(key="gpus").value
        other = 8 if gpus != 8 else 4
        changed = timed(lambda: app.slider(key="gpus").set_value(other).run())
        back = timed(lambda: app.slider(key="gpus").set_value(gpus).run())
        batch = app.slider(key="flow_batch") if any(s.key == "flow_batch" for s in app.slider) else None
        moved = timed(lambda: batch.set_value(0).run()) if batch is not None else float("nan")
        sizes = figure_bytes(app)
        print(f"{name}:")
        print(f"  first run {first:6.2f} s | GPUs {gpus}->{other} (new run) {changed:6.2f} s | "
              f"back to {gpus} (from memory) {back:6.2f} s | flow batch slider {moved:6.2f} s")
        print(f"  {len(sizes)} figures, {sum(sizes) / 1024:,.0f} KiB in all, largest {max(sizes) / 1024:,.0f} KiB")


if __name__ == "__main__":
    main()
