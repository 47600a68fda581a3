"""How much the simulation and the recording cost next to the forwards they show.

    .venv/bin/python bench/bench_engine.py            # tutorial config, data size 100,000, the largest settings
    .venv/bin/python bench/bench_engine.py --quick    # tutorial config only
    .venv/bin/python bench/bench_engine.py --models   # a training run of every model instead

For each configuration, in this one process and on the same batches:
  bare        a loop calling the model on each whole batch (no DataParallel)
  bare-chunks a loop calling the model on each chunk, one after another (the replicas' forwards)
  simulated   SimulatedDataParallel over the batches, nothing recorded
  recorded    dpviz.record(config): the simulated run plus the hooks and timers that build the trace
A training configuration compares a plain step (forward, loss, backward, SGD) per whole batch on
one device (`bare`) with the recorded DataParallel training run; --models does that for each model.
Times are the best of several repeats; ratios are against `bare` and `bare-chunks`. Peak memory is
the Python heap peak from tracemalloc (measured in a second pass, since tracing slows the run) plus
the process's peak resident size at the end.

Threads: the simulation borrows each replica's thread from a pool (dpviz/engines/dp/workers.py) where
torch starts and joins one per replica per call; the last lines time both ways of running 16 empty
jobs at once, which is the per-call cost real DataParallel pays and the simulated timeline leaves out.
"""
from __future__ import annotations

import argparse
import resource
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))  # results.py beside this script

from dpviz import RunConfig, SimulatedDataParallel, record
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.config import MODELS
from dpviz.engines.dp.workers import POOL, Pool
from results import results


def _batches(config: RunConfig) -> tuple[torch.nn.Module, list[torch.Tensor]]:
    model, loader = tutorial.build(config)
    return model, [data for data, _ in loader]


def training_cases(config: RunConfig) -> dict[str, callable]:
    """A plain training step per batch on one device against the recorded DataParallel training run."""
    model, loader = tutorial.build(config)
    batches = [(tutorial.call(config, data, ids.tolist()), tutorial.model_input(config, data)) for data, ids in loader]
    teacher, optimizer = tutorial.training_parts(config, model)

    def bare():
        for (args, kwargs), x in batches:
            optimizer.zero_grad()
            with torch.no_grad():
                target = teacher(x)
            tutorial.loss_of(config, model(*args, **kwargs), target).backward()
            optimizer.step()

    return {"bare": bare, "recorded": lambda: record(config)}


def cases(config: RunConfig) -> dict[str, callable]:
    if config.train:
        return training_cases(config)
    model, batches = _batches(config)
    parallel = SimulatedDataParallel(model, device_ids=list(range(config.gpus)))

    def bare():
        for data in batches:
            model(data)

    def bare_chunks():
        for data in batches:
            for chunk in data.chunk(config.gpus):
                model(chunk)

    def simulated():
        for data in batches:
            parallel(data)

    return {"bare": bare, "bare-chunks": bare_chunks, "simulated": simulated, "recorded": lambda: record(config)}


def best_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def heap_peak(fn) -> int:
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def thread_costs(count: int, calls: int = 300) -> tuple[float, float]:
    """Seconds per call to run `count` empty jobs at once: threads started and joined, or borrowed."""
    job, pool = (lambda: None), Pool()

    def started() -> None:
        for _ in range(calls):
            threads = [threading.Thread(target=job) for _ in range(count)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()

    def borrowed() -> None:
        for _ in range(calls):
            pool.run_each([job] * count)

    return best_time(started, 3) / calls, best_time(borrowed, 3) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tutorial configuration only")
    parser.add_argument("--models", action="store_true", help="a training run of every model (3,000 rows, 4 devices)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # the replicas' threads should not fight torch's own thread pool
    configs = [(RunConfig(batch_size=30, data_size=100, gpus=8, backend="simulated"), 20)]
    if args.models:
        configs = [(RunConfig(model=m, batch_size=30, data_size=3_000, gpus=4, backend="simulated", train=True), 3)
                   for m in MODELS]
    elif not args.quick:
        configs.append((RunConfig(batch_size=30, data_size=100_000, gpus=8, backend="simulated"), 3))
        configs.append((RunConfig(batch_size=30, data_size=30_000, gpus=8, backend="simulated", train=True), 3))
        # The largest settings' shape: wide batches on the most devices the page offers.
        configs.append((RunConfig(batch_size=256, data_size=100_000, gpus=16, backend="simulated"), 3))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} torch thread(s)")
    with results("bench_engine", "models" if args.models else "quick" if args.quick else "configs") as figures:
        measure(configs, figures)


def label(config: RunConfig) -> str:
    """A configuration's name in the figures: model, training, batch, rows, devices."""
    return (f"{config.model}{' training' if config.train else ''}, batch {config.batch_size}, "
            f"{config.data_size:,} rows, {config.gpus} devices")


def measure(configs: list[tuple[RunConfig, int]], figures: dict) -> None:
    figures["configs"] = []
    for config, repeats in configs:
        print(f"\n{'training: ' if config.train else ''}{config.model}, batch {config.batch_size}, data {config.data_size:,}, {config.gpus} simulated devices, "
              f"{config.num_batches:,} batches (best of {repeats})")
        timings = {name: best_time(fn, repeats) for name, fn in cases(config).items()}
        peaks = {name: heap_peak(fn) for name, fn in cases(config).items()}
        chunks = timings.get("bare-chunks")
        for name, seconds in timings.items():
            against_chunks = f"{seconds / chunks:6.1f}x bare-chunks" if chunks else ""
            print(f"  {name:<12} {seconds * 1e3:10.1f} ms  {seconds / timings['bare']:7.1f}x bare  {against_chunks}  "
                  f"{seconds / config.num_batches * 1e6:8.0f} us/batch  heap peak {peaks[name] / 2**20:7.1f} MiB")
        if "simulated" in timings:
            print(f"  recording adds {timings['recorded'] / timings['simulated'] - 1:+.0%} to the simulated run")
        figures["configs"].append({
            "label": label(config), "batches": config.num_batches, "repeats": repeats,
            "threads_at_once": POOL.at_once(config.gpus),
            "seconds": timings, "heap_peak_mib": {name: peak / 2**20 for name, peak in peaks.items()},
            "per_batch_us": {name: t / config.num_batches * 1e6 for name, t in timings.items()},
            "over_bare": {name: t / timings["bare"] for name, t in timings.items()},
            "over_bare_chunks": {name: t / chunks for name, t in timings.items()} if chunks else None,
        })
    started, borrowed = thread_costs(16)
    print(f"\n16 empty jobs at once, per call: a thread started and joined for each {started * 1e6:,.0f} us "
          f"(real DataParallel), borrowed from the pool {borrowed * 1e6:,.0f} us (the simulation)")
    print(f"process peak resident size {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    figures.update(thread_started_us=started * 1e6, thread_borrowed_us=borrowed * 1e6,
                   peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


if __name__ == "__main__":
    main()
