"""DistributedDataParallel, as the rest of dpviz sees it: its words, its options, its parts, its rules for a
config (no torch)."""
from __future__ import annotations

from dpviz.catalogue import INPUT_SPECS
from dpviz.engines.parts import Parts
from dpviz.engines.ddp.options import DdpOptions
from dpviz.engines.spec import EngineSpec
from dpviz.engines.ddp.sampler_rows import rank_loads


def batches(config) -> int:
    """Steps of the run: every rank has as many (DistributedSampler pads, or drops, to make it so)."""
    return len(rank_loads(config.data_size, config.batch_size, config.gpus, batch_per_process=config.batch_per_process,
                          drop_last=config.drop_last, uneven=config.uneven, epochs=config.epochs))


def problem(config) -> str | None:
    """Why these settings do not go together under DDP, in one sentence; None when they do."""
    spec = INPUT_SPECS[config.inputs]
    if spec.dataparallel_only:
        return (f"inputs {config.inputs} shows a DataParallel pitfall ({spec.dataparallel_only}); "
                "DistributedDataParallel hands each rank its own batch, so use it with engine dp.")
    if config.uneven and (config.shuffle or config.drop_last):
        return "uneven splits the rows by hand into contiguous shards, in order, so it needs shuffle and drop_last off."
    if config.accumulate > 1 and not config.train:
        return (f"accumulate {config.accumulate} sums gradients over {config.accumulate} steps before one all-reduce, "
                "so it needs train.")
    return None


def fit(values: dict) -> dict:
    """The smallest change that makes a link's settings go together under DDP."""
    changes: dict = {}
    if INPUT_SPECS[values["inputs"]].dataparallel_only:
        changes["inputs"] = "tensor"
    if values["uneven"]:
        changes.update(shuffle=False, drop_last=False)
    if values["accumulate"] > 1 and not values["train"]:
        changes["accumulate"] = 1
    return changes


SPEC = EngineSpec(
    name="ddp",
    label="DistributedDataParallel",
    short="DDP",
    runs="DistributedDataParallel",
    title="How DistributedDataParallel shares the work",
    unit="step",
    lanes_label="Number of ranks (processes)",
    lane_files="ranks",
    processes=True,
    options_title="DistributedDataParallel options",
    options_type=DdpOptions,
    # What its reducer and the launcher reported (buckets, the world, the ranks' own figures); what each rank held
    # at the end (its parameters, gradients and optimizer state: facts.read_held); the bytes it handed each
    # collective, step by step (facts.read_moved); the user's own module.
    facts=("ddp", "held", "moved", "model"),
    parts=Parts(
        vocabulary="dpviz.engines.ddp.vocabulary:VOCABULARY",
        engine="dpviz.engines.ddp.engine:ENGINE",
        check="dpviz.engines.ddp.check:check_trace",
        batches="dpviz.engines.ddp.spec:batches",
        config_problem="dpviz.engines.ddp.spec:problem",
        fit="dpviz.engines.ddp.spec:fit",
        facts="dpviz.engines.ddp.facts:read_trace_facts",
        summary="dpviz.engines.ddp.read.summary:key_figures_ddp",
        summary_rows="dpviz.engines.ddp.read.summary:summary_rows_ddp",
        explain="dpviz.engines.ddp.read.explain:explain_ddp",
        log="dpviz.engines.ddp.read.log:tutorial_log_ddp",
        log_header="dpviz.engines.ddp.read.log:ddp_header",
        chrome_events="dpviz.engines.ddp.read.chrome:ddp_events",
        devices="dpviz.engines.ddp.read.words:describe_ranks",
        note="dpviz.engines.ddp.read.words:ddp_note",
        report_heading="dpviz.engines.ddp.read.words:ddp_heading",
        outcome="dpviz.engines.ddp.read.words:ddp_outcome",
        model_bytes="dpviz.engines.ddp.read.traffic:ddp_model_bytes",
        traffic="dpviz.engines.ddp.read.traffic:ddp_traffic",
        memory_why="dpviz.figures.memory:balanced_why",
        timeline_range="dpviz.engines.ddp.read.timeline:timeline_ddp_figure",
        timeline_window="dpviz.engines.ddp.read.timeline:window_size",
        moves_at="dpviz.engines.ddp.read.traffic:moves_at",
        plan="dpviz.engines.ddp.plan:plan",
        rank_program="dpviz.engines.ddp.rank:PROGRAM",
        views={
            "one_step": "dpviz.engines.ddp.read.one_step:one_step_ddp_figure",
            "flow": "dpviz.engines.ddp.read.flow:flow_ddp_figure",
            "split": "dpviz.engines.ddp.read.split:split_ddp_figure",
            "timeline": "dpviz.figures.timeline:timeline_figure",
            "samples": "dpviz.engines.ddp.read.sample_map:sample_map_ddp_figure",
            "memory": "dpviz.figures.memory:memory_figure",
            "log": "dpviz.figures.log:bounded_log",
        },
    ),
    preload=("torch.distributed.optim", "dpviz.engines.ranks.program", "dpviz.engines.ddp.rank", "dpviz.engines.ddp.engine",
             "dpviz.engines.ddp.merge"),
)
