"""ZeRO-1 (torch.distributed.optim.ZeroRedundancyOptimizer over DistributedDataParallel), as the rest of dpviz
sees it: DDP's processes, rows, options and views, its own words, check and optimizer (no torch).

Every rank runs DDP exactly as the ddp engine does (the same rank code, the same launcher, torchrun too);
only the optimizer differs: each rank keeps the optimizer's state of the parameters it owns, steps those,
and broadcasts them to the others."""
from __future__ import annotations

import dataclasses

from dpviz.engines.ddp.spec import SPEC as DDP

SPEC = dataclasses.replace(
    DDP,
    name="zero1",
    label="ZeRO-1",
    short="ZeRO-1",
    runs="ZeroRedundancyOptimizer over DDP",
    title="How ZeRO-1 shares the optimizer's state",
    options_title="ZeRO-1 options (DDP's, and the optimizer)",
    parts=dataclasses.replace(
        DDP.parts,
        vocabulary="dpviz.engines.zero1.vocabulary:VOCABULARY",
        engine="dpviz.engines.zero1.engine:ENGINE",
        check="dpviz.engines.zero1.check:check_trace",
        rank_program="dpviz.engines.zero1.rank:PROGRAM",
        plan="dpviz.engines.zero1.plan:plan",
        paper_note="dpviz.engines.zero1.plan:PAPER_NOTE",
        traffic="dpviz.engines.zero1.read.traffic:zero1_traffic",
        moves_at="dpviz.engines.zero1.read.traffic:moves_at",
        summary="dpviz.engines.zero1.read.text:key_figures_zero1",
        summary_rows="dpviz.engines.zero1.read.text:summary_rows_zero1",
        explain="dpviz.engines.zero1.read.text:explain_zero1",
        memory_why="dpviz.engines.zero1.read.memory:sharded_state_why",
        memory_opening="dpviz.engines.zero1.read.memory:sharded_step",
        # DDP's views but its Flow, whose "only the gradients move" ZeRO-1's broadcast of each updated shard belies:
        # One step draws both.
        views={key: where for key, where in DDP.parts.views.items() if key != "flow"},
    ),
    preload=(*DDP.preload, "dpviz.engines.zero1.engine", "dpviz.engines.zero1.rank"),
    opens_with=(("train", True),),
    opens_why="ZeRO-1 shards the optimizer's state, which only training makes",
)
