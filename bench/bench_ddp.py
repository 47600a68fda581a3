"""What DistributedDataParallel's processes cost, next to DataParallel's engine on the same config.

    .venv/bin/python bench/bench_ddp.py                  # 2, 4, 8 and 16 ranks, the tutorial's settings, training
    .venv/bin/python bench/bench_ddp.py --ranks 2 4      # fewer

For each rank count, in one run:
  first ddp   a fresh Python process that records one DDP run: the forkserver starts (importing torch,
              torch.distributed and torch._dynamo once), then the ranks; what a server's first visitor waits
  later ddp   the median of REPEATS runs in this process, the forkserver already up
  dp          the median of REPEATS recordings of the DataParallel engine (simulated devices), same config
and, from the later runs' traces, the median over runs of the slowest rank's process start (fork of
the forkserver to the rank's first line), process group init, DDP() construction (broadcast of rank
0's parameters), step 1 (one bucket, all-reduced after the whole backward) and the median later step.
Ratios are against the DataParallel engine measured in the same run. Every rank sets one thread
(torch.set_num_threads(1)): on a machine with few cores, step times above 2 ranks are mostly the
processes taking turns on the cores, not communication.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))  # results.py beside this script

from dpviz.config import RunConfig
from dpviz.engines import engine
from results import save

REPEATS = 5
FIRST_RUN = """
import sys, time
sys.path.insert(0, {root!r})
from dpviz.config import RunConfig
from dpviz.engines import engine
if __name__ == "__main__":
    start = time.perf_counter()
    trace = engine("ddp").record(RunConfig(engine="ddp", gpus={ranks}, train=True))
    assert trace.failure is None, trace.failure
    print(time.perf_counter() - start)
"""


def first_run(ranks: int) -> float:
    """Seconds for one DDP run in a fresh interpreter (import dpviz and torch not counted)."""
    root = str(Path(__file__).resolve().parents[1])
    script = Path(__file__).with_name("out") / "ddp_first_run.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(FIRST_RUN.format(root=root, ranks=ranks))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def step_times(trace) -> list[float]:
    """Per step, the slowest rank's time from loading its rows to the end of its step."""
    times = []
    for batch in trace.batches:
        per_rank = {}
        for span in trace.spans_of(batch.index):
            if span.phase in ("broadcast", "rebuild"):
                continue
            lo, hi = per_rank.get(span.lane, (span.start, span.end))
            per_rank[span.lane] = (min(lo, span.start), max(hi, span.end))
        times.append(max(hi - lo for lo, hi in per_rank.values()))
    return times


def measure(ranks: int) -> dict:
    config = RunConfig(engine="ddp", gpus=ranks, train=True)
    first = first_run(ranks)
    walls, parts = [], []
    for _ in range(REPEATS):
        start = time.perf_counter()
        trace = engine("ddp").record(config)
        walls.append(time.perf_counter() - start)
        assert trace.failure is None, trace.failure
        startup = trace.facts["ddp"]["startup_s"]
        steps = step_times(trace)
        parts.append({
            "start": max(s["start"] for s in startup), "init": max(s["init"] for s in startup),
            "ddp": max(s["ddp"] for s in startup), "step0": steps[0], "later": statistics.median(steps[1:]),
        })
    dp = RunConfig(gpus=ranks, train=True)
    dp_walls = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        engine("dp").record(dp)
        dp_walls.append(time.perf_counter() - start)
    result = {"ranks": ranks, "first_ddp_s": first, "later_ddp_s": statistics.median(walls),
              "dp_s": statistics.median(dp_walls)}
    for key in parts[0]:
        result[f"{key}_s"] = statistics.median(p[key] for p in parts)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8, 16])
    args = parser.parse_args()
    load_start = os.getloadavg()
    rows = [measure(ranks) for ranks in args.ranks]
    print(f"{'ranks':>5} {'first ddp':>10} {'later ddp':>10} {'dp':>8} {'first/dp':>9} {'later/dp':>9} "
          f"{'start':>7} {'init':>7} {'DDP()':>7} {'step 1':>8} {'step n':>8}")
    for r in rows:
        print(f"{r['ranks']:>5} {r['first_ddp_s']:>9.2f}s {r['later_ddp_s']:>9.2f}s {r['dp_s']:>7.3f}s "
              f"{r['first_ddp_s'] / r['dp_s']:>8.0f}x {r['later_ddp_s'] / r['dp_s']:>8.1f}x "
              f"{r['start_s'] * 1e3:>5.0f}ms {r['init_s'] * 1e3:>5.0f}ms {r['ddp_s'] * 1e3:>5.0f}ms "
              f"{r['step0_s'] * 1e3:>6.1f}ms {r['later_s'] * 1e3:>6.1f}ms")
    save("bench_ddp", "ranks", {"rows": rows}, load_start)


if __name__ == "__main__":  # ranks come from a forkserver that imports this module
    main()
