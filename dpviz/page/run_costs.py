"""What a run will cost this host in memory, and about how long it takes: priced from a table measured here.

    price(config)       # bytes the run adds to the host at its peak (its processes, shared pages once), with a margin
    seconds(config)     # how long it takes alone on a quiet host of this kind
    floor()             # what the host holds before any run: the server, the forkserver, the resource tracker

The table (run_costs.json, beside this file) is written by bench/bench_costs.py: for every engine × model ×
(forward only, SGD, Adam) a fixed part and a part per lane (DataParallel's devices, or ranks), and per engine
what each element of the data set costs each process holding it and what each span of the trace costs. A run
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


def spans_of(config: RunConfig) -> int:
    """Roughly how many spans a run of `config` records: a forward (and backward) per lane, plus host phases."""
    return config.num_batches * (config.gpus * (2 if config.train else 1) + 6)


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


def _per(part: str, engine: str) -> float:
    """An engine's measured figure of `part` (per element, per span, ...); the largest any engine has, for an
    engine not measured yet."""
    figures = _table()[part]
    return figures.get(engine, max(figures.values()))


def price(config: RunConfig) -> int:
    """Bytes a run of `config` adds to this host at its peak, with MARGIN."""
    row = _row(config)
    holders = config.gpus if ENGINES[config.engine].processes else 1  # processes holding a copy of the data set
    elements = config.data_size * config.row_elements
    spans = spans_of(config)
    total = (row["fixed"] + row["per_lane"] * config.gpus + _per("per_element", config.engine) * elements * holders
             + _per("per_span", config.engine) * spans)
    # The trace it brings back to the server, which holds it beside the run's processes until they have gone.
    kept = _per("kept_per_span", config.engine) * spans + _per("kept_per_row", config.engine) * config.data_size * config.epochs
    return int(MARGIN * (total + kept))


def seconds(config: RunConfig) -> float:
    """About how long a run of `config` takes alone here: its engine, model and training measured at the
    defaults, and each span past the defaults' at what a long run's spans took."""
    extra = max(0, spans_of(config) - spans_of(RunConfig(engine=config.engine, gpus=config.gpus, train=config.train)))
    return _row(config)["seconds"] + _per("span_seconds", config.engine) * extra


def measured_floor() -> dict[str, int]:
    """{"server": bytes, "forkserver": bytes}: a server that has drawn a page, and the forkserver alone."""
    return _table()["floor"]


def floor() -> int:
    """What this host holds with no run in flight and nothing kept: the server, the forkserver, the tracker,
    and the headroom kept free."""
    measured = measured_floor()
    return measured["server"] + measured["forkserver"] + TRACKER_BYTES + HEADROOM_BYTES
