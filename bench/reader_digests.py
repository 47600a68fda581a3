"""Digests of everything dpviz reads out of saved traces: key figures, the summary table, What happened, the
tutorial log, the Chrome trace, the HTML report, every view's figures and the comparisons between engines.

A refactor of the readers keeps behaviour when the digests of the same saved traces are equal before and
after it:

    python bench/reader_digests.py record DIR        # traces of every engine and preset, saved as JSON
    python bench/reader_digests.py digest DIR > a.json   # with the code before the change
    python bench/reader_digests.py digest DIR > b.json   # and after it; then: diff a.json b.json

Recording runs real processes for DDP, ZeRO-1 and FSDP (a few seconds each); digesting runs nothing.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _configs() -> dict[str, object]:
    from dpviz.config import RunConfig
    from dpviz.engines import ENGINES
    from dpviz.presets import ALL_PRESETS

    configs = {f"preset-{name}": preset.config for name, preset in ALL_PRESETS.items()}
    for engine in ENGINES:
        configs[f"{engine}-default"] = RunConfig(engine=engine)
        adam = {"optimizer": "adam"} if engine != "dp" else {}
        configs[f"{engine}-adam-4"] = RunConfig(engine=engine, gpus=4, train=True, model="mlp", **adam)
    return configs


def record(folder: Path) -> None:
    from dpviz.engines import ENGINES
    from dpviz.engines.run import record as run
    from dpviz.trace import json_io

    folder.mkdir(parents=True, exist_ok=True)
    for name, config in _configs().items():
        (folder / f"{name}.json").write_text(json_io.dumps(run(config)))
        print(name, file=sys.stderr)
    import torch

    for engine in ENGINES:  # a module of the user's own, trained on one batch
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
        trace = run(model, torch.randn(12, 6), engine=engine, gpus=2, train=True)
        (folder / f"own-{engine}.json").write_text(json_io.dumps(trace))


def _hash(make, *args) -> str:
    """The digest of what `make(*args)` returns, or of the exception it raises (a reader that fails on a
    saved trace must fail the same way after a refactor, and be seen to)."""
    try:
        value = make(*args)
    except Exception as error:  # noqa: BLE001 (recorded, not hidden)
        return f"raises {type(error).__name__}: {str(error)[:80]}"
    if hasattr(value, "to_json"):
        value = value.to_json()
    elif hasattr(value, "to_csv"):
        value = value.to_csv()
    elif not isinstance(value, str):
        value = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(value.encode()).hexdigest()[:16]


def digest(folder: Path) -> dict[str, dict[str, str]]:
    from dpviz.analysis.explain import explain
    from dpviz.analysis.summary import key_figures, summary_table
    from dpviz.exports import chrome_trace
    from dpviz.exports.tutorial_log import tutorial_log
    from dpviz.figures.report import html_report
    from dpviz.figures.views import VIEWS, BATCH
    from dpviz.trace import json_io

    found: dict[str, dict[str, str]] = {}
    traces = {}
    for path in sorted(folder.glob("*.json")):
        trace = traces[path.stem] = json_io.loads(path.read_text())
        out = found[path.stem] = {
            "key figures": _hash(key_figures, trace), "summary": _hash(summary_table, trace),
            "explain": _hash(explain, trace), "log": _hash(tutorial_log, trace),
            "chrome": _hash(chrome_trace.dumps, trace), "report": _hash(html_report, trace)}
        for view in VIEWS:
            if not view.shows(trace):
                continue
            try:
                shown = view.figures_for_report(trace)
            except Exception as error:  # noqa: BLE001
                shown = [("raises", type(error).__name__)]
            for key, figure in shown:
                out[f"view {view.key} {key}"] = _hash(lambda: figure)
            if view.control == BATCH:
                for batch in range(min(len(trace.batches), 4)):
                    out[f"view {view.key} batch {batch}"] = _hash(view.build, trace, batch)
    found.update(_comparisons(traces))
    return found


def _comparisons(traces: dict) -> dict[str, dict[str, str]]:
    """The Both page's comparison and Memory-every-engine's, for every engine's default and Adam runs."""
    from dpviz.analysis.compare import comparison, times_sentences
    from dpviz.analysis.memory_compare import reading
    from dpviz.figures.compare import comparison_figure
    from dpviz.figures.memory_compare import bytes_per_step_figure, memory_compare_figure

    out: dict[str, dict[str, str]] = {}
    for kind in ("default", "adam-4"):
        every = [traces[f"{engine}-{kind}"] for engine in ("dp", "ddp", "zero1", "fsdp") if f"{engine}-{kind}" in traces]
        dp, ddp = every[0], every[1]
        out[f"compare {kind}"] = {"figure": _hash(comparison_figure, dp, ddp), "words": _hash(comparison, dp, ddp),
                                  "times": _hash(times_sentences, dp, ddp)}
        out[f"memory every engine {kind}"] = {"figure": _hash(memory_compare_figure, every),
                                              "bytes": _hash(bytes_per_step_figure, every),
                                              "reading": _hash(reading, every)}
    return out


if __name__ == "__main__":
    verb, where = sys.argv[1], Path(sys.argv[2])
    if verb == "record":
        record(where)
    else:
        print(json.dumps(digest(where), indent=1, sort_keys=True))
