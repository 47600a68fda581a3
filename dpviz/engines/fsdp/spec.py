"""FSDP (torch.distributed.fsdp.fully_shard, FSDP2), as the rest of dpviz sees it: DDP's processes and rows,
its own words, wrapping, check and views (no torch).

Every rank runs the ddp engine's rank code and launcher (torchrun too); where that code wraps the model in
DistributedDataParallel, this engine's `wrap` shards it with fully_shard instead. DDP's options that belong to
its reducer (bucket_cap_mb, find_unused_parameters, no_sync accumulation, join) are not offered, nor the hand
split (uneven) that needs join to end."""
from __future__ import annotations

import dataclasses

from dpviz.engines.ddp.spec import SPEC as DDP
from dpviz.engines.spec import Option

_DDP_ONLY = {"bucket_cap_mb", "accumulate", "find_unused", "join", "uneven"}
_VIEWS = ("split", "timeline", "samples", "memory", "log")  # DDP's that it draws as DDP does

SPEC = dataclasses.replace(
    DDP,
    name="fsdp",
    label="FSDP",
    short="FSDP",
    runs="FSDP2 fully_shard",
    title="How FSDP shards the model across the ranks",
    options_title="FSDP options",
    options=(*(option for option in DDP.options if option.name not in _DDP_ONLY),
             Option("reshard_after_forward", True, "fully_shard(reshard_after_forward=True)",
                    "On: each module's gathered parameters are freed after its forward and gathered again for its "
                    "backward. Off: they stay whole from forward to backward, one all-gather fewer per module for "
                    "the whole model's parameters held at once.")),
    facts=("ddp", "held", "moved", "model", "modules"),  # modules: which parameters each sharded module gathers
    parts=dataclasses.replace(
        DDP.parts,
        vocabulary="dpviz.engines.fsdp.vocabulary:VOCABULARY",
        engine="dpviz.engines.fsdp.engine:ENGINE",
        check="dpviz.engines.fsdp.check:check_trace",
        facts="dpviz.engines.fsdp.facts:read_trace_facts_fsdp",
        rank_program="dpviz.engines.fsdp.rank:PROGRAM",
        wire="dpviz.engines.fsdp.read.traffic:fsdp_wire",
        summary="dpviz.engines.fsdp.read.text:key_figures_fsdp",
        summary_rows="dpviz.engines.fsdp.read.text:summary_rows_fsdp",
        explain="dpviz.engines.fsdp.read.text:explain_fsdp",
        log="dpviz.engines.fsdp.read.text:tutorial_log_fsdp",
        devices="dpviz.engines.fsdp.read.text:describe_ranks_fsdp",
        views={**{key: where for key, where in DDP.parts.views.items() if key in _VIEWS},
               "step": "dpviz.engines.fsdp.read.step:step_fsdp_figure"},  # one sharded module, phase by phase
    ),
    preload=(*DDP.preload, "torch.distributed.fsdp", "dpviz.engines.fsdp.engine", "dpviz.engines.fsdp.rank"),
)
