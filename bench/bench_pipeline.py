"""A pipeline's bubble as it runs here, preset by preset: the idle share replayed with each stage on a device of its
own (each pass its CPU time) and on this host's wall clock, as the Schedule draws them, beside the textbook's
(S - 1) / (M + S - 1), the most microbatches' activations a stage kept, and the run's time.

    .venv/bin/python bench/bench_pipeline.py            # every pipeline preset, 3 runs each (their median)

Each run is recorded as the page records it (dpviz.engines.apart: a process of its own, its stages forked from the
forkserver). Both shares are the opening step's (the second: the first also agrees the stages' shapes), the median
of the runs. Results go to bench/out/bench_pipeline.json; bench/write_docs.py writes them into
docs/pipeline.md.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from results import results  # noqa: E402
from dpviz.engines.apart import record_apart  # noqa: E402
from dpviz.engines.pipeline.read.bubble import held_most, idle_share, opening_step, replay, textbook_share  # noqa: E402
from dpviz.presets import PIPELINE_PRESETS  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each preset (their median is kept)")
    args = parser.parse_args()
    record_apart(PIPELINE_PRESETS["pipeline-bubble"].config)  # the forkserver up and warm
    with results("bench_pipeline", "presets") as figures:
        rows = []
        for name, preset in PIPELINE_PRESETS.items():
            config = preset.config
            shares, replayed, seconds, most = [], [], [], None
            for _ in range(args.runs):
                began = time.perf_counter()
                trace = record_apart(config)
                seconds.append(time.perf_counter() - began)
                assert trace.failure is None, trace.failure
                step = opening_step(trace)
                shares.append(idle_share(trace, step))
                replayed.append(replay(trace, step).share)
                most = held_most(trace, step)
            row = {"preset": name, "schedule": config.schedule, "stages": config.gpus,
                   "microbatches": config.microbatches, "textbook": textbook_share(config.gpus, config.microbatches),
                   "replayed": statistics.median(replayed), "replayed_least": min(replayed),
                   "replayed_most": max(replayed), "measured": statistics.median(shares), "measured_least": min(shares), "measured_most": max(shares),
                   "first_stage_held": most[0] if most else None, "seconds": statistics.median(seconds)}
            rows.append(row)
            print(f"{name:26} {row['schedule']:5} S={row['stages']} M={row['microbatches']:2}: textbook "
                  f"{row['textbook']:.0%}, replayed {row['replayed']:.0%}, measured {row['measured']:.0%} ({row['measured_least']:.0%} to "
                  f"{row['measured_most']:.0%}); stage 1 held {row['first_stage_held']}; {row['seconds']:.2f} s",
                  flush=True)
        figures.update(runs=args.runs, presets=rows)


if __name__ == "__main__":
    main()
