"""Pitfall presets: one configuration each for a way DataParallel surprises people, ready to run.

    PRESETS["kwargs-small-batch"].config      # the RunConfig that shows it (DataParallel's pitfalls)
    DDP_PRESETS["ddp-uneven"].config          # DistributedDataParallel's
    SHARDED_PRESETS["zero1-uneven"].config    # where memory goes: DDP with Adam, ZeRO-1's and FSDP's; ALL_PRESETS: all
    preset_of(config)                         # the preset a configuration is, if any

Each is the tutorial's defaults changed only where the pitfall needs it, so a run shows the pitfall
and nothing else. What happened is explained from the run itself (dpviz.engines.dp.read.explain_pitfalls), never
from the preset's text: the text only says what to look for. Beside each text is its claim (dpviz.preset_claims): a
function of the run that says whether the run shows what the text says, and the mark its opening chart carries.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Callable

from dpviz import preset_claims as claims
from dpviz.config import RunConfig


EVERY_ENGINE = "every engine"  # a preset whose lesson is read beside the other engines: the page "Memory, every engine"
# The step a preset's views of one step open on (dpviz.analysis.opening_step): the last whole step, as every run
# opens, or the last, short one, where the lesson is.
WHOLE_STEP, LAST_STEP = "whole", "last"


@dataclass(frozen=True)
class Preset:
    """A named configuration and what to look for when it runs."""

    name: str
    title: str
    look_for: str
    settings: dict[str, Any] = field(default_factory=dict)
    # The view that shows the lesson (a key of dpviz.figures.views.VIEWS, "compare" for the Compare tab of two
    # engines compared, or EVERY_ENGINE for the page of every engine's memory): the page opens there and the preset's
    # banner names it.
    opens: str = "flow"
    step: str = WHOLE_STEP  # a run that fails opens on the step it failed in, whatever this says
    # What the text claims, checked on the run itself (dpviz.preset_claims): trace -> Shown. None: not yet declared.
    claim: Callable[[Any], claims.Shown] | None = None
    # A comparison's two engines (the config's engine the second, as a link's engines=A,B); None: the page's first pair
    # (DataParallel and DDP). A comparison's claim may read the first engine's run too: claim(run, first_run).
    pair: tuple[str, str] | None = None

    @functools.cached_property  # validated once: the sidebar and the banner look presets up on every rerun
    def config(self) -> RunConfig:
        return RunConfig(**{**RunConfig().to_dict(), "backend": "auto", **self.settings})


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("idle-gpus", "Idle GPUs on a short last batch",
           "100 rows in batches of 30 leave a last batch of 10; on 8 GPUs torch.chunk makes 5 chunks of 2, "
           "so GPUs 5-7 get nothing and DataParallel says nothing.",
           {"gpus": 8}, opens="split", step=LAST_STEP, claim=claims.idle_gpus),
    Preset("batchnorm-one-row", "A 1-row chunk reaches BatchNorm",
           "95 rows in batches of 30 end with a batch of 5; on 4 GPUs it splits 2, 2, 1, and BatchNorm1d in "
           "training mode cannot normalise a single row: the last batch fails.",
           {"model": "mlp", "train": True, "gpus": 4, "data_size": 95}, opens="flow", claim=claims.batchnorm_one_row),
    Preset("kwargs-small-batch", "A keyword argument with a batch smaller than the GPUs",
           "model(x, scale=0.5) on 8 GPUs: the keyword is copied to all 8, but the last batch's 10 rows make "
           "only 5 chunks of x, so replicas 5-7 are called with no x at all.",
           {"inputs": "kwargs", "gpus": 8}, opens="inputs", claim=claims.kwargs_small_batch),
    Preset("scalar-loss", "forward returns a scalar loss",
           "Each replica returns a 0-dim loss; gather warns and returns one loss per GPU. Averaging that "
           "vector weighs a 2-row chunk like a 4-row one.",
           {"model": "loss", "gpus": 3}, opens="pitfall", claim=claims.scalar_loss),
    Preset("rnn-hidden-dim", "A GRU's hidden state split on the wrong dimension",
           "h0 is (layers, batch, hidden): its batch is on dim 1, but DataParallel splits every tensor on "
           "dim 0, so h0 is cut along its layers: one piece, one replica, and a hidden-size error.",
           {"model": "gru", "inputs": "hidden", "gpus": 2}, opens="pitfall", claim=claims.rnn_hidden_dim),
    Preset("state-lost", "State changed in forward is lost",
           "The model counts calls in self.calls and rows in a buffer. Replicas are shallow copies made "
           "anew for every batch: the Python counter never moves and the buffer counts replica 0's rows only.",
           {"model": "counter", "gpus": 2}, opens="pitfall", claim=claims.state_lost),
)}

# DistributedDataParallel's own, each run live on real processes.
DDP_PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("ddp-batch-per-process", "DDP: batch_size is per process",
           "Code moved from DataParallel keeps DataLoader(batch_size=30), but under DDP every rank loads 30: on 4 "
           "ranks a step trains on 120 rows, so 360 rows make 3 steps where DataParallel takes 12 batches of 30.",
           {"engine": "ddp", "gpus": 4, "batch_per_process": True, "train": True, "data_size": 360}, opens="split",
           claim=claims.ddp_batch_per_process),
    Preset("ddp-padding", "DDP: DistributedSampler repeats rows",
           "10 rows on 3 ranks: every rank must load as many (4), so the sampler repeats the first 2 rows "
           "of its order. An evaluation metric then counts them twice.",
           {"engine": "ddp", "gpus": 3, "data_size": 10, "batch_size": 6, "shuffle": False}, opens="samples",
           claim=claims.ddp_padding),
    Preset("ddp-drop-last", "DDP: drop_last drops rows",
           "The same 10 rows on 3 ranks with DistributedSampler(drop_last=True): 3 rows each, and row 9 is "
           "never seen in the epoch.",
           {"engine": "ddp", "gpus": 3, "data_size": 10, "batch_size": 6, "shuffle": False, "drop_last": True},
           opens="samples", claim=claims.ddp_drop_last),
    Preset("ddp-no-set-epoch", "DDP: set_epoch forgotten",
           "Two shuffled epochs without sampler.set_epoch(epoch): DistributedSampler seeds its shuffle with "
           "seed + epoch, so both epochs load the very same rows in the very same order.",
           {"engine": "ddp", "gpus": 2, "epochs": 2, "set_epoch": False, "data_size": 20, "batch_size": 10},
           opens="samples", claim=claims.ddp_no_set_epoch),
    Preset("ddp-unused-parameter", "DDP: a parameter that gets no gradient",
           "A layer forward never uses: step 1 ends without all-reducing (its bucket never fills) and "
           "step 2's forward raises. find_unused_parameters=True fixes it.",
           {"engine": "ddp", "gpus": 2, "model": "unused", "train": True}, opens="timeline",
           claim=claims.ddp_unused_parameter),
    Preset("ddp-uneven", "DDP: ranks with different numbers of batches",
           "Rows split by hand: rank 0 gets 4 batches, ranks 1-2 get 3. Rank 0's fourth all-reduce waits "
           "for ranks that have left, until the run's 3-second timeout. Turn on join to fix it.",
           {"engine": "ddp", "gpus": 3, "data_size": 10, "batch_size": 3, "shuffle": False, "uneven": True,
            "train": True, "timeout_s": 3}, opens="split", claim=claims.ddp_uneven),
)}

# Where the memory goes: what DDP keeps on every rank, and what ZeRO-1 and FSDP split, each run live.
SHARDED_PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("ddp-adam-state", "DDP with Adam: the optimizer state on every rank",
           "Adam keeps two moments per parameter: at the end of a step each of 4 DDP ranks holds the transformer's "
           "26,242 parameters, as many gradients and 52,484 numbers of optimizer state, the tallest part of its bar, "
           "the same numbers four times over (DataParallel's GPU 0 alone holds as much). ZeRO-1 keeps each "
           "parameter's state on one rank only: its 4 ranks' optimizer state adds up to one DDP rank's.",
           # A vocabulary of 1,024 tokens and 2 rows a rank: the state outweighs the activations, as in a large model
           {"engine": "ddp", "gpus": 4, "train": True, "model": "transformer", "input_size": 1024, "batch_size": 8,
            "data_size": 32, "optimizer": "adam"}, opens=EVERY_ENGINE, claim=claims.ddp_adam_state),
    Preset("zero1-uneven", "ZeRO-1: one large parameter, uneven shards",
           "An MLP on 512 features: its first weight (16 x 512) holds 8,192 of the model's 8,274 elements. "
           "ZeroRedundancyOptimizer hands out whole parameters, so on 4 ranks one rank keeps Adam's state of 8,192 "
           "elements and the other three share that of 82: the largest shard decides the memory saved.",
           {"engine": "zero1", "gpus": 4, "train": True, "model": "mlp", "input_size": 512, "optimizer": "adam",
            "data_size": 96, "batch_size": 32},  # 8 rows a rank each step: BatchNorm never meets a single row
           opens=EVERY_ENGINE, claim=claims.zero1_uneven),
    Preset("fsdp-keep-gathered", "FSDP: reshard_after_forward off",
           "fully_shard(reshard_after_forward=False) on the transformer: each sharded module stays whole from its "
           "forward to its backward. The timeline has no all-gather in backward; the memory view holds the whole "
           "model gathered on every rank at the end of forward, as DDP holds it. Turned on, each block is gathered "
           "again in backward and only one is whole at a time.",
           {"engine": "fsdp", "gpus": 2, "train": True, "model": "transformer", "reshard_after_forward": False},
           opens="timeline", claim=claims.fsdp_keep_gathered),
)}

# A pipeline's lessons: the bubble and the microbatches that shrink it, and what 1F1B saves over GPipe. The transformer
# on 4 stages (its 5 layers: embeddings and a block, then a block a stage, then the head), a batch of 32 rows.
_PIPELINE = {"engine": "pipeline", "gpus": 4, "train": True, "model": "transformer", "batch_size": 32, "data_size": 96}
PIPELINE_PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("pipeline-bubble", "Pipeline: as many microbatches as stages",
           "GPipe on 4 stages with 4 microbatches: each stage waits while the first microbatches fill the pipeline and "
           "the last drain it, the grey of the Schedule's replay (each stage on a device of its own): the textbook's "
           "(S - 1) / (M + S - 1) = 3 / 7 of every stage's time, a little more here because the last stage (the norm and "
           "the head) has less to do than the others. Raise the microbatches to 16 (the next preset) and it shrinks "
           "toward 3 / 19.",
           {**_PIPELINE, "microbatches": 4, "schedule": "gpipe"}, opens="grid"),
    Preset("pipeline-small-bubble", "Pipeline: four times as many microbatches as stages",
           "GPipe on 4 stages with 16 microbatches of 2 rows: the same fill and drain, now a smaller share of the step: "
           "the Schedule's replay shrinks toward the textbook's 3 / 19 from about half the step with 4 microbatches "
           "(the stages' uneven work keeps it above 3 / 19). The price is in Memory: GPipe's first stage keeps all 16 "
           "microbatches' activations until their backward.",
           {**_PIPELINE, "microbatches": 16, "schedule": "gpipe"}, opens="grid"),
    Preset("pipeline-1f1b-memory", "Pipeline: 1F1B keeps fewer activations than GPipe",
           "1F1B on 4 stages with 16 microbatches: the first stage starts a backward after 4 forwards, so it never keeps "
           "more than 4 microbatches' activations, where GPipe keeps all 16; the textbook's bubble is the same. GPipe and 1F1B "
           "draws both, with what each stage keeps; Memory shows this run's, stage by stage.",
           {**_PIPELINE, "microbatches": 16, "schedule": "1f1b"}, opens="schedules"),
    Preset("pipeline-one-microbatch", "Pipeline: one microbatch, too few for the stages",
           "The whole batch as one microbatch on 4 stages: only one stage works at a time, so the Schedule's replay "
           "leaves each idle 3 / 4 of the step, (S - 1) / (M + S - 1) with M = 1: four processes doing the work of one. "
           "This host's wall clock, below it, adds the sends between them.",
           {**_PIPELINE, "microbatches": 1, "schedule": "gpipe"}, opens="grid"),
)}

# Tensor parallelism's lessons: Megatron's f and g in every block, the forward's g alone where the input is the data,
# and heads split over the ranks.
TP_PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("tp-megatron-f-g", "Tensor parallel: Megatron's f and g in every block",
           "The transformer on 2 ranks: per block two all-reduces in forward (g: attention's output projection and the "
           "MLP's down projection sum their partial outputs) and two in backward (f: the gradients of attention's and "
           "the MLP's inputs), each the size of the activations. The next layer waits for every one: on the critical "
           "path, which is why tensor parallelism stays inside a node.",
           {"engine": "tp", "gpus": 2, "train": True, "model": "transformer"}, opens="timeline", claim=claims.tp_megatron_f_g),
    Preset("tp-ffn-forward-only", "Tensor parallel: ffn on the data, one all-reduce",
           "Linear, GELU, Linear on 2 ranks: the first Linear cut column-wise, the second row-wise. Forward has one "
           "all-reduce (g), summing the second Linear's partial outputs; backward has none: the first Linear's input is "
           "the data, which needs no gradient, so there is no f to run.",
           {"engine": "tp", "gpus": 2, "train": True, "model": "ffn"}, opens="one_step", claim=claims.tp_ffn_forward_only),
    Preset("tp-heads-split", "Tensor parallel: 8 heads over 4 ranks",
           "The transformer's 8 attention heads on 4 ranks: wq, wk and wv cut column-wise, each rank computing 2 whole "
           "heads of q, k and v, and 1/4 of every cut weight. On 3 ranks the heads would not divide, and the run is "
           "refused in one sentence.",
           {"engine": "tp", "gpus": 4, "train": True, "model": "transformer"}, opens="one_step", claim=claims.tp_heads_split),
)}

ALL_PRESETS: dict[str, Preset] = {**PRESETS, **DDP_PRESETS, **SHARDED_PRESETS, **PIPELINE_PRESETS,
                                  **TP_PRESETS}  # a link's or --preset's

# Comparisons: the same settings under DataParallel and DDP at once (the page's "Two engines, compared"; links only).
COMPARE_PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("compare-gpu0", "GPU 0 as the bottleneck, 8 devices",
           "A Linear(512, 512) trained on 8 devices: its parameters (1 MiB) outweigh a batch's rows, so every "
           "step DataParallel's GPU 0 sends a copy of them to 7 others and takes back 7 sets of gradients, "
           "while each DDP rank all-reduces its share: GPU 0's bar, and how it grows with the count.",
           {"engine": "ddp", "gpus": 8, "train": True, "input_size": 512, "output_size": 512, "data_size": 640,
            "batch_size": 64}, opens="compare", claim=claims.compare_gpu0),  # 10 steps: enough after the first for a measured spread
    Preset("compare-tp-fsdp", "TP against FSDP at the same settings",
           "The transformer trained on 4 ranks, under tensor parallelism and under FSDP. TP all-reduces activations "
           "inside every layer (two all-reduces per block in forward, two in backward), each the size of the whole "
           "batch's activations, since every TP rank runs every row; FSDP all-gathers each block's parameters (in forward "
           "and again in backward) and reduce-scatters its gradients, bytes that follow the parameters. At these "
           "settings 30 rows' activations outweigh this small model's parameters, so a TP rank sends more bytes per "
           "step than an FSDP rank; and FSDP holds less per rank: 1/4 of every parameter, where TP keeps the norms, "
           "embeddings and row-wise biases whole on every rank.",
           {"engine": "fsdp", "gpus": 4, "train": True, "model": "transformer"}, opens="compare", pair=("tp", "fsdp"),
           claim=claims.compare_tp_fsdp),
)}
LINK_PRESETS: dict[str, Preset] = {**ALL_PRESETS, **COMPARE_PRESETS}  # what a page link may name


def presets_of(engine: str) -> dict[str, Preset]:
    """The pitfall presets that run on `engine`, by name."""
    return dict(_by_engine().get(engine, {}))  # a copy: a caller may change its own


@functools.cache
def _by_engine() -> dict[str, dict[str, Preset]]:
    by_engine: dict[str, dict[str, Preset]] = {}
    for name, preset in ALL_PRESETS.items():
        by_engine.setdefault(preset.config.engine, {})[name] = preset
    return by_engine


def preset_of(config: RunConfig) -> Preset | None:
    """The preset whose configuration `config` is (any backend), or None."""
    wanted = config if config.backend == "auto" else dataclasses.replace(config, backend="auto")
    return next((preset for preset in ALL_PRESETS.values() if preset.config == wanted), None)
