"""What an FSDP × TP run's words say of its mesh, from its trace: what a rank holds of the parameters tensor parallelism
splits and of those it leaves whole (facts["shares"]: DTensor's placements, local and whole shapes), which collectives
ran in which group (facts["comm_groups"], each rank's own record of the process group of every collective) and the
bytes each was handed per step (facts["moved"]). No torch.

    on_mesh(trace)              # a run with a tensor-parallel degree that recorded its shares
    holdings(trace, rank=0)     # Holdings: the split parameters and the whole ones, the rank's elements of each
    collectives(trace)          # [Collective(name, kind, dim, group, calls, handed bytes)], rank 0's first step
    shares_words / collectives_words / groups_words: the sentences the key figures, explanation and notes share
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import prod

from dpviz.analysis.wording import human_bytes, plural
from dpviz.engines.ddp.read.one_step import moved_at
from dpviz.engines.fsdp.mesh import DP_SHARD, TP, degrees
from dpviz.engines.fsdp.read.mesh import kind_of
from dpviz.trace import Trace

# facts["moved"]'s collectives of a mesh run, in the order a step runs them: (its name there, its kind, the dimension
# whose groups run it, what it moves).
MOVED = (("all-gather (forward)", "all-gather", DP_SHARD, "parameters in forward"),
         ("all-reduce (forward)", "all-reduce", TP, "row-wise Linears' partial outputs in forward, Megatron's g"),
         ("all-gather (backward)", "all-gather", DP_SHARD, "parameters again in backward"),
         ("all-reduce (backward)", "all-reduce", TP, "column-wise inputs' gradients in backward, Megatron's f"),
         ("reduce-scatter", "reduce-scatter", DP_SHARD, "gradients in backward"))


def on_mesh(trace: Trace) -> bool:
    """A run on a two-dimensional mesh whose ranks all reported how DTensor placed their parameters."""
    shares = trace.facts.get("shares")
    return trace.config.tp > 1 and bool(shares) and None not in shares


def mesh_degrees(trace: Trace) -> tuple[int, int]:
    """(dp_shard, tp): FSDP's degree and tensor parallelism's."""
    return degrees(len(trace.lanes), trace.config.tp)


def split_by_tp(placements: list[str]) -> bool:
    """Whether tensor parallelism cut a parameter: its placement on the tp dimension (the second) is a Shard. What it
    leaves whole is Replicate() there, or a DTensor on the dp_shard dimension alone."""
    return len(placements) == 2 and "Shard(" in placements[1]


@dataclass(frozen=True)
class Part:
    """The parameters of one kind (split by tensor parallelism, or left whole) as one rank holds them."""

    names: tuple[str, ...]
    held: int  # elements of them on the rank (its local shapes)
    whole: int  # elements of them in the model (their whole shapes)
    placements: tuple[str, ...]  # their distinct DTensor placements, as torch writes them: "(Shard(dim=0), Shard(dim=1))"

    @property
    def share(self) -> Fraction:
        return Fraction(self.held, max(self.whole, 1))


@dataclass(frozen=True)
class Holdings:
    rank: int
    split: Part
    whole: Part


def holdings(trace: Trace, rank: int = 0) -> Holdings:
    """What `rank` held of the parameters tensor parallelism splits and of those it leaves whole."""
    rows = trace.facts["shares"][rank]
    parts = []
    for split in (True, False):
        mine = [row for row in rows if split_by_tp(row[1]) == split]
        placements = tuple(dict.fromkeys(f"({', '.join(p)})" for _, p, _, _ in mine))
        parts.append(Part(tuple(name for name, *_ in mine), sum(prod(local) for _, _, local, _ in mine),
                          sum(prod(whole) for _, _, _, whole in mine), placements))
    return Holdings(rank, *parts)


@dataclass(frozen=True)
class Collective:
    """One collective of a step, as a rank ran it: how often and with how many bytes handed in, and in which group."""

    name: str  # facts["moved"]'s: "all-gather (forward)"
    kind: str  # the legend's: all-gather, reduce-scatter, all-reduce
    dim: str  # the mesh dimension whose group ran it
    group: tuple[int, ...]  # the ranks of that group, as the rank recorded them (empty when it did not)
    calls: int
    handed: int  # bytes handed in over the step's calls (an all-gather's whole output, a reduce-scatter's whole input)
    what: str


def groups_ran(trace: Trace, rank: int = 0) -> dict[str, tuple[int, ...]]:
    """The legend's kind -> the ranks of the group `rank` ran it in (facts["comm_groups"])."""
    found = {}
    for op, group, _ in (trace.facts.get("comm_groups") or [None])[rank] or []:
        if kind_of(op) is not None and len(group) > 1:
            found[kind_of(op)] = tuple(group)
    return found


def all_groups(trace: Trace) -> dict[str, list[tuple[int, ...]]]:
    """The mesh dimension -> every group that ran its collectives, as the ranks recorded them."""
    dims: dict[str, set[tuple[int, ...]]] = {DP_SHARD: set(), TP: set()}
    for rank in range(len(trace.lanes)):
        for kind, group in groups_ran(trace, rank).items():
            dims[TP if kind == "all-reduce" else DP_SHARD].add(group)
    return {dim: sorted(found) for dim, found in dims.items()}


def collectives(trace: Trace, step: int | None = None, rank: int = 0) -> list[Collective]:
    """Every collective `rank` ran in `step` (the first, by default), with the group it ran in."""
    step = trace.batches[0].index if step is None and trace.batches else step or 0
    moved = moved_at(trace, step)
    calls = {collective: count for at, collective, count, _ in (trace.facts.get("moved") or [None])[rank] or []
             if at == step}
    ran = groups_ran(trace, rank)
    return [Collective(name, kind, dim, ran.get(kind, ()), calls[name], moved[name][rank], what)
            for name, kind, dim, what in MOVED if name in calls and rank in moved.get(name, {})]


def ranks_words(group: tuple[int, ...] | list[int]) -> str:
    return "ranks " + ", ".join(map(str, group))


def groups_words(trace: Trace) -> str:
    """'tp groups (ranks 0, 1; ranks 2, 3) all-reduce; dp_shard groups (ranks 0, 2; ranks 1, 3) all-gather and
    reduce-scatter', as the ranks recorded them."""
    found = all_groups(trace)
    listed = lambda dim: "; ".join(map(ranks_words, found[dim])) or "none recorded"
    return (f"{TP} groups ({listed(TP)}) all-reduce; {DP_SHARD} groups ({listed(DP_SHARD)}) all-gather and "
            "reduce-scatter")


def fraction_words(share: Fraction) -> str:
    return f"{share.numerator}/{share.denominator}" if share.numerator == 1 else f"about 1/{round(1 / share)}" \
        if share else "none"


def shares_words(trace: Trace, rank: int = 0) -> str:
    """What a rank holds on the mesh, in the shares the degrees make and the elements its local shapes count."""
    dp, tp = mesh_degrees(trace)
    mine = holdings(trace, rank)
    text = (f"1/{dp * tp} of each parameter tensor parallelism splits ({plural(len(mine.split.names), 'tensor')}: "
            f"1/{tp} by tensor parallelism, then 1/{dp} of that slice by FSDP), here {mine.split.held:,} of their "
            f"{mine.split.whole:,} elements ({fraction_words(mine.split.share)})")
    if mine.whole.names:
        text += (f"; 1/{dp} of each part it leaves whole ({plural(len(mine.whole.names), 'tensor')}, sharded over "
                 f"{DP_SHARD} only), here {mine.whole.held:,} of their {mine.whole.whole:,} elements "
                 f"({fraction_words(mine.whole.share)})")
    return text


def collective_words(each: Collective) -> str:
    """'2 all-gathers of parameters in forward (264 B handed in)'."""
    return f"{plural(each.calls, each.kind)} of {each.what} ({human_bytes(each.handed)} handed in)"


def collectives_words(trace: Trace, rank: int = 0) -> str:
    """Per step, the collectives of each group `rank` ran in, their calls and bytes."""
    ran = collectives(trace, rank=rank)
    parts = []
    for dim in (DP_SHARD, TP):
        mine = [each for each in ran if each.dim == dim]
        if mine:
            group = next((each.group for each in mine if each.group), ())
            where = f"across its {DP_SHARD} group" if dim == DP_SHARD else f"inside its {TP} group"
            parts.append(f"{where} ({ranks_words(group) if group else 'not recorded'}): "
                         + ", ".join(map(collective_words, mine)))
    return "; ".join(parts)


def model_elements(trace: Trace) -> int:
    """The model's parameter elements, from the whole shapes rank 0 recorded."""
    return sum(prod(whole) for _, _, _, whole in trace.facts["shares"][0])


def loaded(trace: Trace, step: int) -> dict[tuple[int, ...], list[int]]:
    """The dataset rows each tp group loaded in `step` (its ranks load the same ones: they cut the layers, not the
    batch), by the group's ranks."""
    tp = trace.config.tp
    rows: dict[tuple[int, ...], list[int]] = {}
    for span in sorted(trace.spans_of(step, "forward"), key=lambda s: s.lane or 0):
        if span.lane is not None and span.lane % tp == 0:
            rows[tuple(range(span.lane, span.lane + tp))] = trace.sample_ids(span)
    return rows


def data_counts(trace: Trace) -> tuple[int, int]:
    """(the most rows one step loaded, rows loaded again within their epoch), counted by tp groups: one step's rows are
    those of the dp_shard groups together, and a row repeats only where a tp group loads it again in an epoch."""
    from dpviz.engines.ddp.read.tables import steps_per_epoch

    per_step = [sum(map(len, loaded(trace, batch.index).values())) for batch in trace.batches]
    per, seen, again = steps_per_epoch(trace), set(), 0
    for batch in trace.batches:
        if batch.index % per == 0:
            seen = set()
        for rows in loaded(trace, batch.index).values():
            again += sum(1 for row in rows if row in seen)
            seen.update(rows)
    return max(per_step, default=0), again


def data_rows(trace: Trace) -> dict[str, str]:
    """DDP's key figures of the rows, which count every rank, as a mesh counts them."""
    dp, _ = mesh_degrees(trace)
    most, again = data_counts(trace)
    return {"global batch": f"up to {most:,} rows per step (the {dp} {DP_SHARD} groups together, a {TP} group's "
                            f"ranks loading the same rows; batch_size {trace.config.batch_size:,})",
            "rows loaded again": f"{again:,} (DistributedSampler's padding)" if again else "none"}
