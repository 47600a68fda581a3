"""Where a bench script's figures go: bench/out/<script>.json, one entry per part it measured.

    with results("bench_page", "tutorial") as figures:     # the part's figures, written when the block ends
        figures["new_run_median_s"] = 0.021

Each part holds its figures and a `run` record: the command line, when it ran (UTC), the load average at its
start and at its end, the cores, torch's and Python's versions. A part measured again replaces only itself, so
`--quick` or one `--part` leaves the others' figures as they were. bench/write_docs.py writes these figures into
README.md and docs/, and tests/test_doc_figures.py holds the docs to them.
"""
from __future__ import annotations

import contextlib
import datetime
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any, Iterator

OUT = Path(__file__).resolve().parent / "out"


def run_record(load_start: tuple[float, float, float]) -> dict[str, Any]:
    try:
        import torch

        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    return {
        "command": " ".join([".venv/bin/python", os.path.relpath(sys.argv[0], OUT.parents[1]), *sys.argv[1:]]),
        "utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "load_start": [round(x, 2) for x in load_start],
        "load_end": [round(x, 2) for x in os.getloadavg()],
        "cores": len(os.sched_getaffinity(0)),
        "torch": torch_version,
        "python": platform.python_version(),
    }


def save(script: str, part: str, figures: dict[str, Any], load_start: tuple[float, float, float]) -> Path:
    """Write `figures` as `part` of bench/out/`script`.json, beside the parts already there."""
    OUT.mkdir(exist_ok=True)
    path = OUT / f"{script}.json"
    kept = json.loads(path.read_text()) if path.exists() else {}
    # Only parts written here are kept: what a script wrote before it wrote through this module goes.
    kept = {k: v for k, v in kept.items() if isinstance(v, dict) and "run" in v} if isinstance(kept, dict) else {}
    kept[part] = {"figures": figures, "run": run_record(load_start)}
    path.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")
    return path


@contextlib.contextmanager
def results(script: str, part: str) -> Iterator[dict[str, Any]]:
    """A dict to fill with `part`'s figures, saved when the block ends without an error."""
    load_start = os.getloadavg()
    figures: dict[str, Any] = {}
    yield figures
    path = save(script, part, figures, load_start)
    print(f"figures: {os.path.relpath(path)} [{part}]", file=sys.stderr)
