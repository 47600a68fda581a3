"""What a run will cost this host in memory, and about how long it takes: priced from a table measured here.

    price(config)       # bytes the run adds to the host at its peak (its processes, shared pages once), with a margin
    seconds(config)     # how long it takes alone on a quiet host of this kind
    floor()             # what the host holds before any run: the server, the forkserver, the resource tracker

The table (run_costs.json, beside this file) is written by bench/bench_costs.py: for every engine × model ×
(forward only, SGD, Adam) a fixed part and a part per lane (DataParallel's devices, or ranks), and per engine
what each element of the data set costs each process holding it, and what each batch adds (a part for the
batch and a part per lane) to the run's processes, to the trace the server keeps, and to the time. A run
of 8 ranks whose data set holds 16 million numbers costs 8 copies of it: that, not the model, is what a
small host cannot hold, and the price says so before the run starts.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from dpviz.config import RunConfig
from dpviz.engines import ENGINES

TABLE = Path(__file__).with_name("run_costs.json")
MARGIN = 1.25  # a run measured alone peaks higher beside others (sampling misses the top; allocators differ)
TRACKER_BYTES = 7 * 10**6  # multiprocessing's resource tracker
HEADROOM_BYTES = 60 * 10**6  # the sessions' drawing between two looks, and the page cache a host needs to run at all


@functools.cache
def _table() -> dict[str, Any]:
    return json.loads(TABLE.read_text())


def training_of(config: RunConfig) -> str:
    return config.optimizer if config.train else "forward"


def _row(config: RunConfig) -> dict[str, float]:
    runs = _table()["runs"]
    key = f"{config.engine}/{config.model}/{training_of(config)}"
    if key in runs:
        return runs[key]
    # Not measured (a model or an engine added since): priced as the dearest run of its engine and training, or
    # of any engine's with that training.
    same = [row for name, row in runs.items() if name.endswith(f"/{training_of(config)}")]
    own = [row for name, row in runs.items() if name.startswith(f"{config.engine}/") and row in same]
    return max(own or same, key=lambda row: row["fixed"] + 8 * row["per_lane"])


def _per(part: str, engine: str) -> Any:
    """An engine's measured figure of `part`; the largest any engine has, for an engine not measured yet."""
    figures = _table()[part]
    return figures[engine] if engine in figures else max(figures.values(), key=_total)


def _total(value: Any) -> float:
    """The sum of a figure's numbers, however nested: what "largest" compares."""
    return sum(map(_total, value.values())) if isinstance(value, dict) else float(value)


def _per_batch(config: RunConfig, name: str) -> float:
    """What each batch of `config` adds, by `name`: "bytes" in its processes, "kept" by the server, "seconds"."""
    measured = _per("per_batch", config.engine)
    # An engine that only trains (a pipeline) has no forward-only rates: a config not yet fitted to it is priced as the
    # training run it becomes
    rates = measured["train" if config.train or "forward" not in measured else "forward"][name]
    return rates["fixed"] + rates["per_lane"] * config.gpus


def price(config: RunConfig) -> int:
    """Bytes a run of `config` adds to this host at its peak, with MARGIN: its processes (a fixed part and a part
    per lane, the data set once per process holding it, each batch), and the trace it brings back to the server,
    which holds it beside the run's processes until they have gone."""
    row = _row(config)
    holders = config.gpus if ENGINES[config.engine].processes else 1
    elements = config.data_size * config.row_elements
    batches = config.num_batches
    processes = (row["fixed"] + row["per_lane"] * config.gpus + _per("per_element", config.engine) * elements * holders
                 + _per_batch(config, "bytes") * batches)
    kept = _per_batch(config, "kept") * batches + _per("kept_per_row", config.engine) * config.data_size * config.epochs
    return int(MARGIN * (processes + kept))


def seconds(config: RunConfig) -> float:
    """About how long a run of `config` takes alone here: its engine, model and training measured at 4 batches,
    and each batch past those at what long runs' batches took."""
    return _row(config)["seconds"] + _per_batch(config, "seconds") * max(0, config.num_batches - 4)


def measured_floor() -> dict[str, int]:
    """{"server": bytes, "forkserver": bytes}: a server that has drawn a page, and the forkserver alone."""
    return _table()["floor"]


def floor() -> int:
    """What this host holds with no run in flight and nothing kept: the server, the forkserver, the tracker,
    and the headroom kept free."""
    measured = measured_floor()
    return measured["server"] + measured["forkserver"] + TRACKER_BYTES + HEADROOM_BYTES
