"""FSDP (torch.distributed.fsdp.fully_shard, FSDP2), as the rest of dpviz sees it: DDP's processes and rows,
its own words, wrapping, check and views (no torch).

Every rank runs DDP's rank program (dpviz.engines.ranks, torchrun too) with one hook of its own (rank.py): where
DDP's wraps the model in DistributedDataParallel, this engine's shards it with fully_shard. DDP's options that
belong to its reducer are not among its options (options.py).

With a tensor-parallel degree T > 1 (option `tp`) the ranks form torchtitan's two-dimensional mesh (mesh.py): the
model's tensor-parallel plan inside each group of T ranks (the tp engine's own code), then fully_shard over the
ranks / T dp_shard groups; the Mesh view draws it."""
from __future__ import annotations

import dataclasses

from dpviz.catalogue import MODEL_SPECS, OWN
from dpviz.engines.ddp.spec import SPEC as DDP, fit as ddp_fit, problem as ddp_problem
from dpviz.engines.fsdp.options import FsdpOptions
from dpviz.engines.parts import View
from dpviz.engines.tp.spec import FITS, RANKS, plan_problem

_MESH_NOUN = "ranks per tensor-parallel group"
LIMITS_GPUS = 16  # dpviz.config's most ranks (the config stands above the registry, so it is not imported here)


def problem(config) -> str | None:
    """Why these settings do not make an FSDP run, in one sentence; None when they do: DDP's rules, and with a
    tensor-parallel degree, a mesh the ranks fill and a model the tp engine could cut over that degree."""
    why = ddp_problem(config)
    if why or config.tp == 1:
        return why
    if config.gpus % config.tp:
        fits = [w for w in range(config.tp, LIMITS_GPUS + 1, config.tp)]
        return (f"tp {config.tp} does not divide the {config.gpus} ranks, which FSDP × TP lays out as a "
                f"(ranks / {config.tp}) × {config.tp} mesh; use {', '.join(map(str, fits[:4]))} ranks, or tp 1.")
    return plan_problem(config.model, config.tp, _MESH_NOUN)


def fit(values: dict) -> dict:
    """The smallest change that makes a link's settings an FSDP run: DDP's, and with a tensor-parallel degree a model
    with a plan (the tutorial's Linear becomes ffn, as the tp engine fits it), a degree that plan takes and ranks
    that degree divides."""
    changes = ddp_fit(values)
    tp = values.get("tp", 1)
    if tp == 1:
        return changes
    model = values["model"]
    if model != OWN and not MODEL_SPECS[model].tensor.styles:
        changes["model"] = model = FITS
    if plan_problem(model, tp, _MESH_NOUN):
        changes["tp"] = tp = min((w for w in RANKS if not plan_problem(model, w, _MESH_NOUN)),
                                 key=lambda w: (abs(w - tp), w))
    if values["gpus"] % tp:
        changes["gpus"] = min(range(tp, LIMITS_GPUS + 1, tp), key=lambda w: (abs(w - values["gpus"]), w))
    return changes

_VIEWS = ("split", "timeline", "samples", "memory", "log")  # DDP's that it draws as DDP does

SPEC = dataclasses.replace(
    DDP,
    name="fsdp",
    label="FSDP",
    short="FSDP",
    runs="FSDP2 fully_shard",
    title="How FSDP shards the model across the ranks",
    options_title="FSDP options",
    options_type=FsdpOptions,
    # comm_counts (CommDebugMode's tally, as the tp engine writes it), comm_groups (each collective's ranks) and shares
    # (each parameter as DTensor places it on a rank) only from a run on a mesh
    # modules: which parameters each sharded module gathers
    facts=("ddp", "held", "moved", "model", "modules", "comm_counts", "comm_groups", "shares"),
    opens_with=(("train", True),),
    opens_why="FSDP shards training's gradients and optimizer state",
    parts=dataclasses.replace(
        DDP.parts,
        vocabulary="dpviz.engines.fsdp.vocabulary:VOCABULARY",
        engine="dpviz.engines.fsdp.engine:ENGINE",
        check="dpviz.engines.fsdp.check:check_trace",
        facts="dpviz.engines.fsdp.facts:read_trace_facts_fsdp",
        config_problem="dpviz.engines.fsdp.spec:problem",
        fit="dpviz.engines.fsdp.spec:fit",
        rank_program="dpviz.engines.fsdp.rank:PROGRAM",
        plan="dpviz.engines.fsdp.plan:plan",
        traffic="dpviz.engines.fsdp.read.traffic:fsdp_traffic",
        moves_at=None,  # its bytes turn on how each parameter pads to the ranks, which sizes alone do not say
        summary="dpviz.engines.fsdp.read.text:key_figures_fsdp",
        summary_rows="dpviz.engines.fsdp.read.text:summary_rows_fsdp",
        explain="dpviz.engines.fsdp.read.text:explain_fsdp",
        log="dpviz.engines.fsdp.read.text:tutorial_log_fsdp",
        devices="dpviz.engines.fsdp.read.text:describe_ranks_fsdp",
        memory_why="dpviz.engines.fsdp.read.memory:sharded_why",
        views={**{key: where for key, where in DDP.parts.views.items() if key in _VIEWS},
               "one_step": "dpviz.engines.fsdp.read.one_step:one_step_fsdp_figure",
               "step": "dpviz.engines.fsdp.read.step:step_fsdp_figure"},  # one sharded module, phase by phase
        # The two-dimensional mesh, for a run with a tensor-parallel degree: who all-reduces, who all-gathers
        own_views=(View("mesh", "Mesh", "dpviz.engines.fsdp.read.mesh:mesh_figure", after="one_step",
                        shown="dpviz.engines.fsdp.read.mesh:has_mesh"),),
    ),
    preload=(*DDP.preload, "torch.distributed.fsdp", "torch.distributed.tensor.parallel", "torch.distributed.tensor.debug",
             "dpviz.engines.fsdp.engine", "dpviz.engines.fsdp.rank"),
)
