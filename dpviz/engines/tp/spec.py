"""Tensor parallelism (torch.distributed.tensor.parallel), as the rest of dpviz sees it: its words, options, parts
and rules for a config (no torch). Its ranks are DDP's processes (the same launcher, torchrun too) running a program
of its own (rank.py): every rank reads the whole batch and holds a slice of every cut layer."""
from __future__ import annotations

import dataclasses
import math

from dpviz.catalogue import MODEL_SPECS, OWN
from dpviz.engines.ddp.spec import SPEC as DDP, fit as ddp_fit, problem as ddp_problem
from dpviz.engines.spec import Option
from dpviz.engines.tp.options import TpOptions

RANKS = (2, 4, 8)  # the degrees that cut every catalogue model with a plan evenly
WIDTH = 16  # the features its cut Linears split (the hidden width of ffn and of the transformer: workload.models.HIDDEN)
# The model a link whose model has no plan is fitted to: the catalogue's first with one (Megatron's MLP, ffn).
FITS = next(name for name, model in MODEL_SPECS.items() if model.listed and model.tensor.styles)


def batches(config) -> int:
    """Steps of the run: every batch of every epoch (every rank loads each one whole)."""
    return config.epochs * math.ceil(config.data_size / config.batch_size)


def problem(config) -> str | None:
    """Why these settings do not make a tensor-parallel run, in one sentence; None when they do. A user's module is
    held to its own tp_plan once it is built (dpviz.engines.workload.declared)."""
    why = ddp_problem(config)
    if why:
        return why
    if config.gpus < 2:
        return "tensor parallelism cuts every layer over the ranks, so it needs at least 2 ranks."
    return plan_problem(config.model, config.gpus)


def plan_problem(model: str, ranks: int, noun: str = "ranks") -> str | None:
    """Why catalogue model `model` cannot be cut over `ranks` ranks with its declared plan, in one sentence; None when
    it can (a user's module, OWN, is held to its own tp_plan once built). `noun` names what `ranks` counts, for an
    engine whose tensor-parallel group is part of the ranks (FSDP × TP: "ranks per tensor-parallel group")."""
    if model == OWN:
        return None
    plan = MODEL_SPECS[model].tensor
    if not plan.styles:
        return (f"model {model} {plan.why_not}, so it has no tensor-parallel plan; model {FITS} "
                f"({MODEL_SPECS[FITS].label}) has one.")
    if plan.heads and plan.heads % ranks:
        return (f"model {model}'s {plan.heads} attention heads do not divide over {ranks} {noun}, and each "
                f"rank computes whole heads of q, k and v; use {_either([w for w in RANKS if plan.heads % w == 0])} {noun}.")
    if WIDTH % ranks:
        return (f"model {model}'s cut Linears have {WIDTH} features to split, which {ranks} {noun} do not "
                f"divide; use {_either(list(RANKS))} {noun}.")
    return None


def _either(counts: list[int]) -> str:
    return ", ".join(map(str, counts[:-1])) + f" or {counts[-1]}" if len(counts) > 1 else str(counts[0])


def fit(values: dict) -> dict:
    """The smallest change that makes a link's settings a tensor-parallel run: ranks it can cut over, a model with a
    plan (the tutorial's Linear becomes ffn), inputs a rank's DDP rules take."""
    changes = ddp_fit(values)
    if values["gpus"] not in RANKS and values["model"] != OWN:
        changes["gpus"] = min(RANKS, key=lambda w: (abs(w - values["gpus"]), w))
    model = values["model"]
    if model != OWN and not MODEL_SPECS[model].tensor.styles:
        changes["model"] = FITS
    return changes


SPEC = dataclasses.replace(
    DDP,
    name="tp",
    label="Tensor parallel",
    short="TP",
    runs="torch.distributed.tensor.parallel",
    title="How tensor parallelism cuts every layer across the ranks",
    options_title="Tensor-parallel options",
    options_type=TpOptions,
    # Not among that page's live runs ("Memory, every engine"): it runs only models that declare a tensor-parallel plan
    # (the page's MLP has a BatchNorm none can cut); compared in pairs instead. Its plan is in the page's At real size.
    memory_page=False,
    # A bare link's model, the default one Linear, is fitted to a plan (link._opening).
    opens_why="Tensor parallelism cuts pairs of Linears over the ranks",
    # DDP's launcher facts; what each rank held and handed each collective; the cut modules and CommDebugMode's counts.
    facts=("ddp", "held", "moved", "model", "cut_modules", "comm_counts"),
    parts=dataclasses.replace(
        DDP.parts,
        vocabulary="dpviz.engines.tp.vocabulary:VOCABULARY",
        engine="dpviz.engines.tp.engine:ENGINE",
        check="dpviz.engines.tp.check:check_trace",
        batches="dpviz.engines.tp.spec:batches",
        config_problem="dpviz.engines.tp.spec:problem",
        fit="dpviz.engines.tp.spec:fit",
        facts="dpviz.engines.tp.facts:read_trace_facts_tp",
        rank_program="dpviz.engines.tp.rank:PROGRAM",
        plan="dpviz.engines.tp.plan:plan",
        traffic="dpviz.engines.tp.read.traffic:tp_traffic",
        model_bytes="dpviz.engines.tp.read.traffic:tp_model_bytes",
        moves_at=None,  # its bytes are the activations', which turn on the model's shapes, not its parameters
        summary="dpviz.engines.tp.read.text:key_figures_tp",
        summary_rows="dpviz.engines.tp.read.text:summary_rows_tp",
        explain="dpviz.engines.tp.read.text:explain_tp",
        log="dpviz.engines.tp.read.text:tutorial_log_tp",
        log_header="dpviz.engines.tp.read.text:tp_header",
        devices="dpviz.engines.tp.read.text:describe_ranks_tp",
        memory_why="dpviz.engines.tp.read.text:memory_why_tp",
        views={"one_step": "dpviz.engines.tp.read.one_step:one_step_tp_figure",
               "timeline": "dpviz.figures.timeline:timeline_figure",
               "memory": "dpviz.figures.memory:memory_figure",
               "log": "dpviz.figures.log:bounded_log"},
    ),
    # A plan's degree: a run cuts over all its ranks; a plan may also put FSDP across GPUs / degree groups of them
    plan_settings=(Option("tp", 0, "Tensor-parallel degree (0: every GPU)",
                          "ranks in each tensor-parallel group; the GPUs / degree groups are FSDP's (dp_shard x tp); 0 "
                          "cuts over every GPU", kind="whole", limits=(0, 1024)),),
    preload=("torch.distributed.tensor.parallel", "torch.distributed.tensor.debug", "dpviz.engines.ranks.program",
             "dpviz.engines.tp.rank", "dpviz.engines.tp.engine", "dpviz.engines.tp.merge"),
)
"""Tensor parallelism: torch's ColwiseParallel and RowwiseParallel, each rank a slice of every cut Linear."""
