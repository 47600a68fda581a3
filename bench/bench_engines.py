"""Each engine on real processes against DDP in the same run: the step time and the page time, at 2 and 4 ranks.

    .venv/bin/python bench/bench_engines.py                        # ZeRO-1 and FSDP against DDP, 2 and 4 ranks
    .venv/bin/python bench/bench_engines.py --ranks 2 --pairs 3
    .venv/bin/python bench/bench_engines.py --part bare            # each engine recorded against its bare step

The settings are the catalogue's transformer (3 blocks, 9,938 parameters), training with Adam on the tutorial's
100 rows in batches of 30: the model and the optimizer whose memory ZeRO-1 and FSDP split. For each rank count
and each engine, PAIRS pairs run alternately, DDP then the engine (A B A B), and each ratio is the engine's
figure over the DDP figure of its own pair; the median of the pairs is printed beside the medians of both.

  step   the median over steps after the first of the slowest rank's step (from loading its rows to the end
         of its optimizer step), read from the run's trace
  page   seconds for app.py (Streamlit's AppTest, in this process: script time, no browser) to open the link
         ?engine=E&gpus=W&train=true&model=transformer&optimizer=adam, record the run and draw its first view,
         after one untimed page of each engine (the forkserver already up)

Against the bare step (`--part bare`, also run by default): for DDP, ZeRO-1 and FSDP at each rank count, PAIRS
pairs run the same model, rows (BARE_ROWS of them, for a steadier median), optimizer and ranks twice, A B A B:
once as a plain training loop with nothing of dpviz watching (bench/bare_ranks.py: the engine as torch gives
it, each step timed from loading its rows to the end of its optimizer step) and once recorded by dpviz; each
figure is the median over steps after the first of the slowest rank's step, and the ratio recorded / bare.

The load average is printed at the start and at the end: on a shared 2-core machine times vary with it, the
ratios much less. Every rank sets one thread (torch.set_num_threads(1)). Results also go to
bench/out/bench_engines.json.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere without installing
sys.path.insert(0, str(ROOT / "bench"))  # bare_ranks beside this script

from dpviz.config import RunConfig  # noqa: E402
from dpviz.engines import engine  # noqa: E402
from results import results  # noqa: E402

BASE = "ddp"
SETTINGS = dict(train=True, model="transformer", optimizer="adam")


def step_time(trace) -> float:
    """The median over steps after the first of the slowest rank's step, in seconds."""
    times = []
    for batch in trace.batches[1:]:
        per_rank: dict[int, tuple[float, float]] = {}
        for span in trace.spans_of(batch.index):
            if span.lane is None:
                continue
            lo, hi = per_rank.get(span.lane, (span.start, span.end))
            per_rank[span.lane] = (min(lo, span.start), max(hi, span.end))
        times.append(max(hi - lo for lo, hi in per_rank.values()))
    return statistics.median(times)


def run_step(name: str, ranks: int) -> float:
    trace = engine(name).record(RunConfig(engine=name, gpus=ranks, **SETTINGS))
    assert trace.failure is None, trace.failure
    return step_time(trace)


def run_page(name: str, ranks: int) -> float:
    from streamlit.testing.v1 import AppTest

    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    for key, value in {"engine": name, "gpus": str(ranks), "train": "true", "model": SETTINGS["model"],
                       "optimizer": SETTINGS["optimizer"]}.items():
        app.query_params[key] = value
    start = time.perf_counter()
    app.run()
    seconds = time.perf_counter() - start
    assert not app.exception and app.get("plotly_chart"), f"the {name} page at {ranks} ranks drew no chart"
    return seconds


BARE_ROWS = 1200  # 40 steps at 2 and at 4 ranks: a median over steps that vary by several times on 2 cores


def against_bare(name: str, ranks: int, pairs: int) -> dict:
    """`name`'s step as a plain loop, then recorded by dpviz, `pairs` times: each pair's ratio and both medians."""
    from bare_ranks import bare_steps_retried, slowest_median

    config = RunConfig(engine=name, gpus=ranks, data_size=BARE_ROWS, **SETTINGS)
    bare, recorded, restarts = [], [], 0
    for _ in range(pairs):
        steps, failed = bare_steps_retried(name, config)
        restarts += failed
        bare.append(slowest_median(steps))
        trace = engine(name).record(config)
        assert trace.failure is None, trace.failure
        recorded.append(step_time(trace))
    ratios = [r / b for r, b in zip(recorded, bare)]
    return {"engine": name, "ranks": ranks, "bare_s": statistics.median(bare), "recorded_s": statistics.median(recorded),
            "ratio": statistics.median(ratios), "ratios": ratios, "bare_restarts": restarts}


def alternate(measure, name: str, ranks: int, pairs: int) -> dict:
    """DDP then `name`, `pairs` times: each pair's ratio, and both engines' medians."""
    base, mine = [], []
    for _ in range(pairs):
        base.append(measure(BASE, ranks))
        mine.append(measure(name, ranks))
    ratios = [m / b for m, b in zip(mine, base)]
    return {"engine": name, "ranks": ranks, "ddp_s": statistics.median(base), "engine_s": statistics.median(mine),
            "ratio": statistics.median(ratios), "ratios": ratios}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--engines", nargs="+", default=["zero1", "fsdp"])
    parser.add_argument("--pairs", type=int, default=5, help="DDP/engine pairs per figure (A B A B)")
    parser.add_argument("--page-pairs", type=int, default=3, help="pairs for the page time")
    parser.add_argument("--part", choices=["all", "ddp", "bare"], default="all",
                        help="ddp: the engines against DDP; bare: each engine recorded against its bare step")
    args = parser.parse_args()
    load_before = os.getloadavg()
    print(f"load average at the start: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}")
    for name in [BASE, *args.engines]:  # the forkserver up, each engine's modules imported: not timed
        run_step(name, args.ranks[0])
        if args.part != "bare":
            run_page(name, args.ranks[0])
    if args.part in ("all", "bare"):
        with results("bench_engines", "against_bare") as figures:
            figures["rows"], figures["steps_rows"] = [], BARE_ROWS
            for ranks in args.ranks:
                for name in [BASE, *args.engines]:
                    row = against_bare(name, ranks, args.pairs)
                    figures["rows"].append(row)
                    print(f"{name:>6} {ranks} ranks: recorded step {row['recorded_s'] * 1e3:6.1f} ms against the bare "
                          f"step's {row['bare_s'] * 1e3:6.1f} ms: {row['ratio']:.2f}x "
                          f"(pairs {', '.join(f'{r:.2f}' for r in row['ratios'])})", flush=True)
    if args.part in ("all", "ddp"):
        with results("bench_engines", "against_ddp") as figures:
            figures["rows"] = []
            for ranks in args.ranks:
                for name in args.engines:
                    step = alternate(run_step, name, ranks, args.pairs)
                    page = alternate(run_page, name, ranks, args.page_pairs)
                    figures["rows"].append({"step": step, "page": page})
                    print(f"{name:>6} {ranks} ranks: step {step['engine_s'] * 1e3:6.1f} ms against DDP's "
                          f"{step['ddp_s'] * 1e3:6.1f} ms: {step['ratio']:.2f}x (pairs {', '.join(f'{r:.2f}' for r in step['ratios'])}); "
                          f"page {page['engine_s']:.2f} s against {page['ddp_s']:.2f} s: {page['ratio']:.2f}x "
                          f"(pairs {', '.join(f'{r:.2f}' for r in page['ratios'])})", flush=True)
    load_after = os.getloadavg()
    print(f"load average at the end: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")


if __name__ == "__main__":  # ranks come from a forkserver that imports this module
    main()
