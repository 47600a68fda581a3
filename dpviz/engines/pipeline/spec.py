"""Pipeline parallelism (torch.distributed.pipelining: PipelineStage with ScheduleGPipe or Schedule1F1B), as the
rest of dpviz sees it: its words, options, parts and rules for a config (no torch). Its ranks are DDP's processes
(the same launcher, torchrun too) running a program of its own: each rank is a stage."""
from __future__ import annotations

from dpviz.catalogue import OWN
from dpviz.engines.ddp.spec import SPEC as DDP
from dpviz.engines.parts import Parts, View
from dpviz.engines.pipeline.layers import fitting, problem_of
from dpviz.engines.pipeline.options import PipelineOptions
from dpviz.engines.spec import EngineSpec

_READ = "dpviz.engines.pipeline.read"


def batches(config) -> int:
    """Steps of the run: every full batch of every epoch (a last, smaller batch is left out: see rank.schedule)."""
    return config.epochs * (config.data_size // config.batch_size)


def problem(config) -> str | None:
    """Why these settings do not make a pipeline, in one sentence; None when they do. A user's module is held to its
    layers, its batch and that batch's rows once it is built (stages.own_problem)."""
    stages, own = config.gpus, config.model == OWN
    why = too_few(stages) or (None if own else problem_of(config.model, stages))
    if why:
        return why
    if not own and config.inputs != "tensor":
        return (f"inputs {config.inputs} passes more than one tensor; a pipeline hands each stage the one tensor the "
                "stage before gave, so it needs inputs tensor.")
    if not config.train:
        return "a pipeline's schedule runs each microbatch's forward and backward, so it needs train."
    if config.data_size < config.batch_size:
        return (f"data_size {config.data_size:,} is less than one batch of {config.batch_size:,}, and a pipeline leaves a "
                "short last batch out; raise data_size or lower batch_size.")
    why = schedule_problem(config.schedule, config.microbatches, stages)
    if why:
        return why
    return None if own else uneven(config.batch_size, config.microbatches)


def too_few(stages: int) -> str | None:
    """Why `stages` stages make no pipeline, or None."""
    if stages < 2:
        return "a pipeline cuts the model into stages, one per process, so it needs at least 2 stages."
    return None


def schedule_problem(schedule: str, micro: int, stages: int) -> str | None:
    """Why torch's `schedule` does not run `micro` microbatches through `stages` stages, or None."""
    if schedule == "1f1b" and micro < stages:
        return (f"1f1b's first stage runs as many forwards as there are stages before its first backward, so torch's "
                f"Schedule1F1B needs at least {stages} microbatches for {stages} stages, got {micro}; use "
                "gpipe or more microbatches.")
    return None


def uneven(batch_size: int, micro: int) -> str | None:
    """Why a batch does not cut into `micro` microbatches, or None."""
    if batch_size % micro:
        return (f"batch_size {batch_size:,} does not divide into {micro} equal microbatches, and torch's stages "
                f"receive every microbatch into buffers shaped like the first; use a batch size that {micro} divides, or "
                f"{_divisors(batch_size)} microbatch{'' if batch_size == 1 else 'es'}.")
    return None


def fit(values: dict) -> dict:
    """The smallest change that makes a link's settings a pipeline."""
    changes: dict = {"gpus": max(2, values["gpus"]), "inputs": "tensor", "train": True}
    stages = changes["gpus"]
    if values["model"] != OWN and problem_of(values["model"], stages):
        changes["model"], layers = fitting(stages)
        changes["gpus"] = stages = min(stages, layers)
    batch = values["batch_size"]
    least = stages if values.get("schedule") == "1f1b" else 1
    fits = [m for m in range(least, min(batch, 64) + 1) if batch % m == 0]
    if values.get("microbatches") not in fits:  # the nearest count of equal microbatches, else a batch that divides
        if fits:
            changes["microbatches"] = min(fits, key=lambda m: (abs(m - values.get("microbatches", 4)), m))
        else:  # none divides (a batch smaller than the stages 1F1B needs): as many as it needs, a batch of them
            micro = max(least, min(values.get("microbatches", 4), 64))
            changes.update(microbatches=micro, batch_size=micro * -(-batch // micro))
    if values["data_size"] < changes.get("batch_size", batch):
        changes["data_size"] = changes.get("batch_size", batch)
    return changes


def _divisors(n: int) -> str:
    shown = [str(m) for m in range(1, min(n, 64) + 1) if n % m == 0]
    return ", ".join(shown[:-1]) + f" or {shown[-1]}" if len(shown) > 1 else shown[0]


SPEC = EngineSpec(
    name="pipeline",
    label="Pipeline",
    short="pipeline",
    runs="torch.distributed.pipelining (GPipe, 1F1B)",
    title="How a pipeline passes microbatches through the stages",
    unit="step",
    lanes_label="Number of stages (processes)",
    lane_files="stages",
    processes=True,
    options_title="Pipeline options",
    options_type=PipelineOptions,
    # DDP's launcher facts (clocks, start-up, exit codes); what each stage held at the end; its layers, what it sent
    # each step, the activations it kept per microbatch in flight, the CPU time of each pass and its process's cores
    # (facts.py); the user's own module.
    facts=("ddp", "held", "model", "layers", "sent", "flight", "cpu", "cores"),
    memory_page=False,
    # A schedule runs backward too; a bare link's model and microbatches are fitted to the stages (link._opening).
    opens_with=(("train", True),),
    opens_why="A pipeline cuts a model's layers into stages and trains them",
    parts=Parts(
        vocabulary="dpviz.engines.pipeline.vocabulary:VOCABULARY",
        engine="dpviz.engines.pipeline.engine:ENGINE",
        check="dpviz.engines.pipeline.check:check_trace",
        batches="dpviz.engines.pipeline.spec:batches",
        config_problem="dpviz.engines.pipeline.spec:problem",
        fit="dpviz.engines.pipeline.spec:fit",
        facts="dpviz.engines.pipeline.facts:read_trace_facts_pipeline",
        summary=f"{_READ}.text:key_figures_pipeline",
        summary_rows=f"{_READ}.text:summary_rows_pipeline",
        explain=f"{_READ}.text:explain_pipeline",
        log=f"{_READ}.text:tutorial_log_pipeline",
        chrome_events=DDP.parts.chrome_events,
        devices=f"{_READ}.text:describe_stages",
        note=DDP.parts.note,
        report_heading=DDP.parts.report_heading,
        outcome=DDP.parts.outcome,
        model_bytes=f"{_READ}.traffic:pipeline_model_bytes",
        traffic=f"{_READ}.traffic:pipeline_traffic",
        memory_why="dpviz.figures.memory:balanced_why",
        timeline_range=DDP.parts.timeline_range,
        timeline_window=DDP.parts.timeline_window,
        rank_program="dpviz.engines.pipeline.rank:PROGRAM",
        own_batch="dpviz.engines.pipeline.stages:own_problem",  # a user's module: its layers and its batch
        plan="dpviz.engines.pipeline.plan:plan",
        plan_layers="dpviz.engines.pipeline.stages:plan_layers",  # the layers a stage takes, measured one by one
        view_lacks=f"{_READ}.lacks:pipeline_lacks",
        views={
            "one_step": f"{_READ}.one_step:one_step_pipeline_figure",
            "timeline": "dpviz.figures.timeline:timeline_figure",
            "memory": f"{_READ}.memory:memory_pipeline_figure",
            "memory.then": f"{_READ}.memory:held_pipeline_figure",
            "log": "dpviz.figures.log:bounded_log",
            "step": f"{_READ}.step:step_pipeline_figure",
        },
        own_views=(
            # The first tab, the one a bare link opens on: the bubble is a pipeline's lesson.
            View("grid", "Schedule", f"{_READ}.schedule:schedule_figure", control="batch", after="pitfall",
                 then=f"{_READ}.schedule:wall_clock_figure"),
            View("schedules", "GPipe and 1F1B", f"{_READ}.compare:schedules_figure", control="whole", after="memory"),
        ),
    ),
    preload=("torch.distributed.pipelining", "dpviz.engines.ranks.program", "dpviz.engines.pipeline.rank",
             "dpviz.engines.pipeline.engine", "dpviz.engines.pipeline.merge"),
)
