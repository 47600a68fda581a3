"""FSDP (torch.distributed.fsdp.fully_shard, FSDP2), as the rest of dpviz sees it: DDP's processes and rows,
its own words, wrapping, check and views (no torch).

Every rank runs DDP's rank program (dpviz.engines.ranks, torchrun too) with one hook of its own (rank.py): where
DDP's wraps the model in DistributedDataParallel, this engine's shards it with fully_shard. DDP's options that
belong to its reducer are not among its options (options.py)."""
from __future__ import annotations

import dataclasses

from dpviz.engines.ddp.spec import SPEC as DDP
from dpviz.engines.fsdp.options import FsdpOptions

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
    facts=("ddp", "held", "moved", "model", "modules"),
    opens_with=(("train", True),),
    opens_why="FSDP gathers each module for backward and reduce-scatters its gradients, which only training runs",  # modules: which parameters each sharded module gathers
    parts=dataclasses.replace(
        DDP.parts,
        vocabulary="dpviz.engines.fsdp.vocabulary:VOCABULARY",
        engine="dpviz.engines.fsdp.engine:ENGINE",
        check="dpviz.engines.fsdp.check:check_trace",
        facts="dpviz.engines.fsdp.facts:read_trace_facts_fsdp",
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
    ),
    preload=(*DDP.preload, "torch.distributed.fsdp", "dpviz.engines.fsdp.engine", "dpviz.engines.fsdp.rank"),
)
