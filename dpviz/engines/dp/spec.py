"""DataParallel, as the rest of dpviz sees it: its words, its parts, its rules for a config (no torch)."""
from __future__ import annotations

from dpviz.engines.dp.options import DpOptions
from dpviz.engines.parts import Parts
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
    options_title="DataParallel options",
    options_type=DpOptions,
    # Simulated DataParallel's replica threads, the loss per GPU and the state a forward changed.
    # The user's own module: its class and parameter counts (dpviz.trace.own_model).
    facts=("state", "losses", "threads", "threads_at_once", "model"),
    parts=Parts(
        vocabulary="dpviz.engines.dp.vocabulary:VOCABULARY",
        engine="dpviz.engines.dp.engine:ENGINE",
        check="dpviz.engines.dp.check:check_trace",
        batches="dpviz.engines.dp.spec:batches",
        facts="dpviz.engines.dp.facts:read_facts",
        summary="dpviz.engines.dp.read.summary:key_figures_dp",
        summary_rows="dpviz.engines.dp.read.summary:summary_rows_dp",
        explain="dpviz.engines.dp.read.explain:explain_dp",
        log="dpviz.engines.dp.read.log:tutorial_log_dp",
        log_header="dpviz.engines.dp.read.log:header_dp",
        chrome_events="dpviz.engines.dp.read.chrome:dp_events",
        devices="dpviz.engines.dp.read.words:describe_gpus",
        note="dpviz.figures.trace_words:gpu_note",
        report_heading="dpviz.engines.dp.read.words:dp_heading",
        outcome="dpviz.engines.dp.read.words:dp_outcome",
        own_batch="dpviz.engines.workload.own:scatter_problem",
        model_bytes="dpviz.engines.dp.read.traffic:dp_model_bytes",
        traffic="dpviz.engines.dp.read.traffic:dp_traffic",
        memory_why="dpviz.engines.dp.read.words:device_zero_why",
        timeline_range="dpviz.engines.dp.read.timeline:timeline_dp_figure",
        timeline_window="dpviz.engines.dp.read.timeline:dp_window_size",
        timeline_detail="dpviz.figures.views:timeline_batches",
        pitfall_shown="dpviz.engines.dp.read.pitfall_checks:has_pitfall",
        inputs_sampled="dpviz.engines.dp.read.inputs:argument_batches",
        moves_at="dpviz.engines.dp.read.traffic:moves_at",
        compare_lesson="dpviz.engines.dp.read.hub_lesson:hub_lesson",
        plan="dpviz.engines.dp.plan:plan",
        views={
            # The views it draws, in no particular order (dpviz.figures.views orders the tabs).
            "pitfall": "dpviz.engines.dp.read.pitfalls:pitfall_figure",
            "one_step": "dpviz.engines.dp.read.one_step:one_step_dp_figure",
            "flow": "dpviz.engines.dp.read.flow:flow_figure",
            "split": "dpviz.engines.dp.read.split:split_dp_figure",
            "timeline": "dpviz.figures.timeline:timeline_figure",
            "samples": "dpviz.engines.dp.read.sample_map:sample_map_dp_figure",
            "step": "dpviz.engines.dp.read.step:step_figure",
            "inputs": "dpviz.engines.dp.read.inputs:inputs_figure",
            "memory": "dpviz.figures.memory:memory_figure",
            "log": "dpviz.figures.log:bounded_log",
        },
    ),
    preload=("dpviz.engines.dp.engine", "dpviz.engines.dp.recorder"),
    # Beside another engine its lesson is GPU 0 as the hub (read.hub_lesson): every replica's gradients come back to
    # it in training, from two other GPUs at least; on 4, three spokes, as the tutorial's picture draws them.
    compared_opens_with=(("train", True), ("gpus", 4)),
    compared_opens_why="DataParallel's GPU 0 is the hub of a training step that serves two other GPUs or more",
)
