"""DataParallel, as the rest of dpviz sees it: its words, its parts, its rules for a config (no torch)."""
from __future__ import annotations

from dpviz.engines.spec import EngineSpec


def batches(config) -> int:
    """The DataLoader's batches: the last one holds what is left."""
    return -(-config.data_size // config.batch_size)


SPEC = EngineSpec(
    name="dp",
    label="DataParallel",
    short="DataParallel",
    runs="nn.DataParallel",
    title="How nn.DataParallel splits a batch",
    unit="batch",
    lanes_label="Number of GPUs",
    lane_files="gpus",
    processes=False,
    # Simulated DataParallel's replica threads, the loss per GPU and the state a forward changed.
    # The user's own module: its class and parameter counts (dpviz.own_model).
    facts=("state", "losses", "threads", "threads_at_once", "model"),
    parts={
        "vocabulary": "dpviz.engines.dp.vocabulary:VOCABULARY",
        "engine": "dpviz.engines.dp.engine:ENGINE",
        "check": "dpviz.engines.dp.check:check_trace",
        "batches": "dpviz.engines.dp.spec:batches",
        "facts": "dpviz.engines.dp.facts:read_facts",
        "summary": "dpviz.analysis.summary:key_figures_dp",
        "summary_rows": "dpviz.analysis.summary:summary_rows_dp",
        "explain": "dpviz.analysis.explain:explain_dp",
        "log": "dpviz.exports.tutorial_log:tutorial_log_dp",
        "log_header": "dpviz.exports.tutorial_log:header_dp",
        "chrome_events": "dpviz.exports.chrome_trace:dp_events",
        "devices": "dpviz.analysis.wording:describe_gpus",
        "note": "dpviz.figures.style:gpu_note",
        "report_heading": "dpviz.figures.report:dp_heading",
        "outcome": "dpviz.cli:dp_outcome",
        "own_batch": "dpviz.engines.workload.own:scatter_problem",
        "model_bytes": "dpviz.analysis.compare:dp_model_bytes",
        "traffic": "dpviz.analysis.compare:dp_traffic",
        "wire": "dpviz.analysis.memory_compare:dp_wire",
        "memory_why": "dpviz.figures.memory:device_zero_why",
        # The views it draws, in no particular order (dpviz.figures.views orders the tabs).
        "view.pitfall": "dpviz.figures.pitfalls:pitfall_figure",
        "view.flow": "dpviz.figures.flow:flow_figure",
        "view.split": "dpviz.figures.split:split_dp_figure",
        "view.timeline": "dpviz.figures.timeline:timeline_figure",
        "timeline_range": "dpviz.figures.timeline:timeline_dp_figure",
        "timeline_window": "dpviz.figures.timeline:dp_window_size",
        "timeline_detail": "dpviz.figures.views:timeline_batches",
        "view.samples": "dpviz.figures.sample_map:sample_map_dp_figure",
        "view.step": "dpviz.figures.step:step_figure",
        "view.inputs": "dpviz.figures.inputs:inputs_figure",
        "view.memory": "dpviz.figures.memory:memory_figure",
        "view.log": "dpviz.figures.log:bounded_log",
    },
)
