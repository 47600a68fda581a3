"""What a run costs this host in memory, engine by engine, model by model, optimizer by optimizer: the page's prices.

    .venv/bin/python bench/bench_costs.py            # measure, print the table, write dpviz/page/run_costs.json
    .venv/bin/python bench/bench_costs.py --quick    # the Linear model only (a look, nothing written)
    .venv/bin/python bench/bench_costs.py --add dp/adam   # measure the rows a new option adds, keep the rest
    .venv/bin/python bench/bench_costs.py --add ddp/sgd/ffn   # one model's row: a model added since
    .venv/bin/python bench/bench_costs.py --add pipeline/rates   # a new engine's per element, batch and row

Each run is recorded as the page records it, in a process of its own forked from the forkserver
(dpviz.engines.apart), while a thread sums the proportional set size (PSS: a page shared by n processes counts
1/n in each) of the forkserver and every process under it, every few milliseconds. A run's cost is that sum's
peak less the forkserver alone: what the run added to the host, its shared pages included once. Measured:

- every engine × model × (forward only, SGD, Adam) at 2 and 6 lanes (ranks; DataParallel's devices at 2 and
  16): a fixed part and a part per lane, the line through the two (the larger of two tries of each);
- per engine, a run whose data holds 10,000,000 elements: what each element of the data set costs each process
  that holds it; and runs of 3,000 batches forward only and 1,000 training at both lane counts: what each batch
  adds, a part for the batch and a part per lane, in the run's processes, in the trace the server keeps, in time;
- the floor: the forkserver alone, and a server that has drawn a page (Streamlit, plotly and pandas, no torch).

dpviz/page/run_costs.py prices a run from this table (docs/architecture.md, "Where runs happen"). Results also
go to bench/out/bench_costs.json (bench/results.py).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from results import save  # noqa: E402
from dpviz.config import CHOICES, MODELS, ConfigError, RunConfig  # noqa: E402
from dpviz.engines import ENGINES  # noqa: E402
from dpviz.engines.apart import record_apart  # noqa: E402
from dpviz.engines.processes import forkserver_pid  # noqa: E402
from dpviz.host_memory import pss_bytes, tree  # noqa: E402
from dpviz.page.run_costs import TABLE  # noqa: E402

MB = 10**6
TRAININGS = ("forward", *CHOICES["optimizer"])  # forward only, or training with each optimizer
LANES = {"dp": (2, 16), "pipeline": (2, 4), "tp": (2, 4)}  # DataParallel's devices are threads of one process:
# measured at its page's extremes; a pipeline's stages at most as many as the catalogue's models have layers to cut
# (the MLP's 4; a model with fewer at the most it takes: lanes()); tensor parallelism's ranks must divide the width
# its Linears split (16), so 4, not 6
# A pipeline trains (its schedule is forward and backward) on equal microbatches: 4 of 8 rows, 4 steps.
SETTINGS = {"pipeline": {"batch_size": 32, "data_size": 128}}
RANKS = (2, 6)


def trainings(engine: str) -> tuple[str, ...]:
    """Forward only, and training with each optimizer the engine offers."""
    return TRAININGS if "optimizer" in ENGINES[engine].unset else ("forward", "sgd")


class Peak:
    """The peak of the PSS summed over the forkserver's tree while the block runs, sampled in a thread."""

    def __init__(self, root: int):
        self.root, self.peak, self._stop = root, 0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, sum(pss_bytes(pid) for pid in tree(self.root)))
            self._stop.wait(0.002)

    def __enter__(self) -> "Peak":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def alone() -> int:
    """The forkserver's tree at rest (no run in flight)."""
    time.sleep(0.05)
    return sum(pss_bytes(pid) for pid in tree(forkserver_pid()))


def cost(config: RunConfig, tries: int = 2) -> tuple[int, float, int]:
    """(bytes the run added to the host at its peak, seconds it took, bytes its trace holds in the process that
    asked for it): the larger, the shorter and the larger of `tries` runs."""
    added, seconds, kept = 0, float("inf"), 0
    for _ in range(tries):
        base, mine = alone(), pss_bytes(os.getpid())
        began = time.perf_counter()
        with Peak(forkserver_pid()) as peak:
            trace = record_apart(config)
        seconds = min(seconds, time.perf_counter() - began)
        added = max(added, peak.peak - base)
        gc.collect()
        kept = max(kept, pss_bytes(os.getpid()) - mine)
        del trace
        gc.collect()
    return added, seconds, kept


def settings(engine: str, model: str, training: str, lanes: int, **more) -> RunConfig:
    train = {} if training == "forward" else {"train": True, "optimizer": training}
    return RunConfig(engine=engine, model=model, gpus=lanes, backend="auto", **train, **{**SETTINGS.get(engine, {}), **more})


def lanes(engine: str, model: str, training: str) -> tuple[int, int] | None:
    """The two lane counts a row is measured at: the engine's, or where the model takes fewer (a pipeline of ffn's 3
    layers) the most it takes; None when the engine does not run this model with this training at two (a pipeline
    cuts only the models that are sequences, and always trains): the rows it does not run are never priced."""
    low, high = LANES.get(engine, RANKS)
    for top in range(high, low, -1):
        try:
            settings(engine, model, training, low), settings(engine, model, training, top)
        except ConfigError:
            continue
        return low, top
    return None


def runs(engine: str, model: str, training: str) -> bool:
    return lanes(engine, model, training) is not None


def row(engine: str, model: str, training: str) -> dict:
    """A run's fixed part and part per lane, the line through its cost at two lane counts, and its seconds alone."""
    low, high = lanes(engine, model, training)
    (at_low, seconds, _), (at_high, _, _) = (cost(settings(engine, model, training, n)) for n in (low, high))
    per_lane = max(0, (at_high - at_low) // (high - low))
    print(f"{engine:6} {model:12} {training:8} {at_low / MB:6.1f} MB at {low}, {at_high / MB:6.1f} MB at "
          f"{high}: {per_lane / MB:5.1f} MB a lane; {seconds:.2f} s", flush=True)
    return {"fixed": max(0, at_low - low * per_lane), "per_lane": per_lane, "seconds": round(seconds, 3)}


def server_floor() -> int:
    """A server's own size once it has drawn a page: Streamlit, plotly and pandas imported, no torch."""
    code = ("import os, streamlit, plotly.graph_objects, pandas; from dpviz.host_memory import pss_bytes; "
            "print(pss_bytes(os.getpid()))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return int(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the Linear model only; nothing written")
    parser.add_argument("--add", metavar="ENGINE/TRAINING[/MODEL]", help="measure only this engine's rows with this "
                        "training (every model it runs, or MODEL's only), or its rates (ENGINE/rates), by the same "
                        "method, into the table as it stands")
    args = parser.parse_args()
    if args.add:
        engine, what, *model = args.add.split("/")
        return add_rates(engine) if what == "rates" else add_rows(engine, what, *model)
    load_start = os.getloadavg()
    record_apart(RunConfig(engine="ddp"))  # the forkserver up and warm
    forkserver = alone()
    runs: dict[str, dict] = {}
    for engine in ENGINES:
        for model in (("linear",) if args.quick else MODELS):
            for training in (training for training in trainings(engine) if runs(engine, model, training)):
                runs[f"{engine}/{model}/{training}"] = row(engine, model, training)
    per_element, per_batch, kept_per_row = {}, {}, {}
    for engine in ENGINES:
        per_element[engine], per_batch[engine], kept_per_row[engine] = rates(engine)
    floor = {"forkserver": forkserver, "server": server_floor()}
    print(f"the forkserver alone {forkserver / MB:.0f} MB; a server that has drawn a page {floor['server'] / MB:.0f} MB")
    table = {"floor": floor, "per_element": per_element, "per_batch": per_batch, "kept_per_row": kept_per_row, "runs": runs,
             "measured": {"utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "load": [round(x, 2) for x in load_start],
                          "lanes": {**LANES, "ranks": RANKS}}}
    if not args.quick:
        TABLE.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
        print(f"written to {TABLE.relative_to(ROOT)}")
    save("bench_costs", "quick" if args.quick else "table", table, load_start)


def rates(engine: str) -> tuple[float, dict, float]:
    """An engine's rates: what each element of the data set costs each process that holds it, what each batch (or
    step) adds (a part for the batch and a part per lane; forward and training, where the engine runs both), and
    what each row costs the server that keeps the trace."""
    low, high = LANES.get(engine, RANKS)
    probe = next(model for model in MODELS if runs(engine, model, "sgd"))  # the first it runs (a pipeline: the MLP)
    small = settings(engine, probe, "sgd", low)
    wide = settings(engine, probe, "sgd", low, data_size=100_000, input_size=100, batch_size=10_000)
    (base, _, base_kept), (at_wide, _, wide_kept) = cost(small), cost(wide)
    holders = low if ENGINES[engine].processes else 1
    element = max(0.0, (at_wide - base) / (holders * wide.data_size * wide.row_elements))
    kept_row = max(0.0, (wide_kept - base_kept) / (wide.data_size - small.data_size))
    # What each batch (or step) adds, a part for the batch and a part per lane: long runs at both lane counts.
    batch_rates = {}
    for training in (training for training in ("forward", "sgd") if runs(engine, probe, training)):
        at_lanes = {}
        for lanes in (low, high):
            short = settings(engine, probe, training, lanes)
            # Long runs near the most batches a run may have (10,000 forward, 1,000 training): a batch's cost
            # falls as a run grows (allocations reused), and a price must hold at the top.
            long = settings(engine, probe, training, lanes, data_size=90_000 if training == "forward" else 30_000,
                            batch_size=SETTINGS.get(engine, {}).get("batch_size", 30))
            (at_short, short_s, short_kept), (at_long, long_s, long_kept) = cost(short), cost(long, tries=1)
            more = long.num_batches - short.num_batches
            at_lanes[lanes] = ((at_long - at_short) / more, (long_kept - short_kept) / more, (long_s - short_s) / more)
        kind = "forward" if training == "forward" else "train"
        figures = {}
        for i, name in enumerate(("bytes", "kept", "seconds")):
            lane = (at_lanes[high][i] - at_lanes[low][i]) / (high - low)
            figures[name] = {"fixed": max(0.0, at_lanes[low][i] - lane * low), "per_lane": max(0.0, lane)}
        batch_rates[kind] = figures
        print(f"{engine:6} {kind:8} a batch: {figures['bytes']['fixed']:.0f} B + {figures['bytes']['per_lane']:.0f} B "
              f"a lane in its processes, {figures['kept']['fixed']:.0f} B + {figures['kept']['per_lane']:.0f} B a "
              f"lane kept by the server, {figures['seconds']['fixed'] * 1e6:.0f} µs + "
              f"{figures['seconds']['per_lane'] * 1e6:.0f} µs a lane", flush=True)
    print(f"{engine:6} {element:.1f} B per element of the data set per process holding it; "
          f"{kept_row:.1f} B per row kept by the server", flush=True)
    return element, batch_rates, kept_row


def add_rates(engine: str) -> None:
    """Measure one engine's rates (rates()) as main() does, into the table as it stands: an engine added since."""
    load_start = os.getloadavg()
    record_apart(RunConfig(engine="ddp"))  # the forkserver up and warm
    table = json.loads(TABLE.read_text())
    table["per_element"][engine], table["per_batch"][engine], table["kept_per_row"][engine] = rates(engine)
    table["added"] = {**table.get("added", {}), f"{engine}/rates": {
        "utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "load": [round(x, 2) for x in load_start]}}
    TABLE.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"written to {TABLE.relative_to(ROOT)}")
    save("bench_costs", "table", table, load_start)


def add_rows(engine: str, training: str, only: str | None = None) -> None:
    """Measure engine × every model (or model `only`) × `training` as main() does, and write them into the table as it
    stands: the rows an option or a model adds (DataParallel's Adam, ffn), without measuring again the rows that did
    not change."""
    load_start = os.getloadavg()
    record_apart(RunConfig(engine="ddp"))  # the forkserver up and warm
    table = json.loads(TABLE.read_text())
    for model in (model for model in MODELS if only in (None, model) and runs(engine, model, training)):
        table["runs"][f"{engine}/{model}/{training}"] = row(engine, model, training)
    if engine in LANES:  # measured at lane counts of its own: the docs say which
        table["measured"]["lanes"][engine] = list(LANES[engine])
    added = f"{engine}/{training}" + (f"/{only}" if only else "")
    table["added"] = {**table.get("added", {}), added: {
        "utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "load": [round(x, 2) for x in load_start]}}
    TABLE.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"written to {TABLE.relative_to(ROOT)}")
    save("bench_costs", "table", table, load_start)


if __name__ == "__main__":
    main()
