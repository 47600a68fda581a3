"""DistributedDataParallel, as the rest of dpviz sees it: its words, its options, its parts, its rules for a
config (no torch)."""
from __future__ import annotations

from dpviz.catalogue import INPUT_SPECS
from dpviz.engines.spec import EngineSpec, Option
from dpviz.engines.ddp.sharding import plan


def batches(config) -> int:
    """Steps of the run: every rank has as many (DistributedSampler pads, or drops, to make it so)."""
    return len(plan(config.data_size, config.batch_size, config.gpus, batch_per_process=config.batch_per_process,
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


# What DDP users tune and where they trip, in the order the page shows them.
OPTIONS = (
    Option("bucket_cap_mb", None, "bucket_cap_mb (MiB; empty: DDP's default)",
           "DDP's gradient bucket cap. Left empty, 25 MiB with a first bucket of 1 MiB; a tiny cap such as 0.0002 "
           "splits even these small models into several buckets.", kind="mib"),
    Option("accumulate", 1, "Accumulate gradients over N steps",
           "N-1 steps under no_sync() (no all-reduce), then one that all-reduces and steps. Needs Train.", kind="whole"),
    Option("epochs", 1, "Epochs", "Passes over the data.", kind="whole"),
    Option("set_epoch", True, "sampler.set_epoch(epoch)", "Off: every epoch loads the same rows in the same order."),
    Option("batch_per_process", False, "batch_size per process",
           "On: every rank's DataLoader loads batch_size rows, as DDP code does; the global batch grows with the "
           "ranks. Off: batch_size is the global batch, as in the tutorial."),
    Option("drop_last", False, "DistributedSampler(drop_last=True)", "Drop the rows that do not divide evenly."),
    Option("find_unused", False, "find_unused_parameters=True", "Needed when forward leaves a parameter unused."),
    Option("uneven", False, "Split the rows by hand (uneven shards)",
           "No DistributedSampler: contiguous shards, so ranks may get different numbers of batches."),
    Option("join", False, "ddp.join() around the loop", "Ranks that run out of batches keep answering the others."),
    Option("timeout_s", 30, "Collective timeout (s)", "How long a rank waits in a collective before the run ends.",
           kind="whole"),
    Option("optimizer", "sgd", "Optimizer",
           "What each rank steps when training: SGD with momentum keeps one buffer per parameter, Adam two "
           "(its optimizer state is twice the parameters).", kind="choice"),
)

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
    options=OPTIONS,
    # What its reducer and the launcher reported (buckets, the world, the ranks' own figures); what each rank held
    # at the end (its parameters, gradients and optimizer state: facts.read_held); the bytes it handed each
    # collective, step by step (facts.read_moved); the user's own module.
    facts=("ddp", "held", "moved", "model"),
    parts={
        "vocabulary": "dpviz.engines.ddp.vocabulary:VOCABULARY",
        "engine": "dpviz.engines.ddp.engine:ENGINE",
        "check": "dpviz.engines.ddp.check:check_trace",
        "batches": "dpviz.engines.ddp.spec:batches",
        "config_problem": "dpviz.engines.ddp.spec:problem",
        "fit": "dpviz.engines.ddp.spec:fit",
        "facts": "dpviz.engines.ddp.facts:read_trace_facts",
        "summary": "dpviz.analysis.summary_ddp:key_figures_ddp",
        "summary_rows": "dpviz.analysis.summary_ddp:summary_rows_ddp",
        "explain": "dpviz.analysis.explain_ddp:explain_ddp",
        "log": "dpviz.exports.tutorial_log:tutorial_log_ddp",
        "log_header": "dpviz.exports.tutorial_log:ddp_header",
        "chrome_events": "dpviz.exports.chrome_trace:ddp_events",
        "devices": "dpviz.analysis.wording:describe_ranks",
        "note": "dpviz.figures.style:ddp_note",
        "report_heading": "dpviz.figures.report:ddp_heading",
        "outcome": "dpviz.cli:ddp_outcome",
        "model_bytes": "dpviz.analysis.compare:ddp_model_bytes",
        "traffic": "dpviz.analysis.compare:ddp_traffic",
        "wire": "dpviz.analysis.memory_compare:ddp_wire",
        "memory_why": "dpviz.figures.memory:balanced_why",
        "opening_batch": "dpviz.analysis.tables_ddp:opening_step",  # the views open on a typical step
        "view.flow": "dpviz.figures.flow_ddp:flow_ddp_figure",
        "view.split": "dpviz.figures.split_ddp:split_ddp_figure",
        "view.timeline": "dpviz.figures.timeline:timeline_figure",
        "timeline_range": "dpviz.figures.timeline_ddp:timeline_ddp_figure",
        "timeline_window": "dpviz.figures.timeline_ddp:window_size",
        "view.samples": "dpviz.figures.sample_map_ddp:sample_map_ddp_figure",
        "view.memory": "dpviz.figures.memory:memory_figure",
        "view.log": "dpviz.figures.log:bounded_log",
    },
)
