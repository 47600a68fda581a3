"""A step of FSDP in the columns every engine shares (dpviz.analysis.one_step), in DDP's frame of ranks.

Each rank holds 1/W of every parameter. Forward: module by module, the ranks all-gather its parameters, run it,
and free the gathered copy (reshard). Backward: they all-gather each module again, and reduce-scatter its
gradients, so each rank keeps the gradients of its own 1/W. Optimizer step: each rank steps its shard; nothing
moves. Bytes are the size of each collective's tensors on each rank as the ranks wrote them down (facts["moved"]):
an all-gather's whole output, a reduce-scatter's whole input.
"""
from __future__ import annotations

import dataclasses
from collections import Counter

import plotly.graph_objects as go

from dpviz.analysis.one_step import Cell, OneStep, idle, update_cell
from dpviz.analysis.wording import human_bytes, plural
from dpviz.engines.ddp.read.one_step import held, one_step_ranks
from dpviz.engines.fsdp.read import mesh_text as mesh
from dpviz.figures.one_step import one_step_figure
from dpviz.trace import Trace

COLLECTIVES = {
    "all-gather (forward)": ("forward", "all-gather", "all-gather"),
    "all-gather (backward)": ("backward", "all-gather", "all-gather"),
    "reduce-scatter": ("backward", "reduce-scatter", "reduce-scatter"),
}
HOVERS = {
    "all-gather (forward)": "all-gather, module by module: each rank hands in its 1/W and gets the whole module",
    "all-gather (backward)": "all-gather again for the backward: the forward freed the gathered parameters",
    "reduce-scatter": "reduce-scatter: every rank's gradients summed, each rank keeping the sum of its own 1/W",
}
# On a mesh (FSDP × TP), also tensor parallelism's all-reduces, inside each tp group: the forward's drawn; the
# backward's said in a note, its column already drawing FSDP's two moves (the most one step draws in a column).
MESH_COLLECTIVES = {**COLLECTIVES, "all-reduce (forward)": ("forward", "all-reduce", "all-reduce")}
MESH_HOVERS = {
    "all-gather (forward)": "all-gather across the rank's dp_shard group, module by module: each rank hands in its "
                            "shard of its tensor-parallel slice and gets the whole slice",
    "all-gather (backward)": "all-gather again across the dp_shard group for the backward: the forward freed the slices",
    "reduce-scatter": "reduce-scatter across the dp_shard group: the slices' gradients summed, each rank keeping its shard",
    "all-reduce (forward)": "all-reduce inside the rank's tp group: each row-wise Linear's partial outputs summed "
                            "(Megatron's g), on the critical path of the layer",
    "all-reduce (backward)": "all-reduce inside the tp group: each column-wise input's gradient summed (Megatron's f)",
}


def fsdp_cells(trace: Trace, step: int, rank: int, rows: int) -> dict[str, Cell]:
    """What an FSDP rank holds and does in each part of a step."""
    config, name, ranks = trace.config, trace.vocabulary.lane_name(rank), len(trace.lanes)
    mine = held(trace, rank)
    params = (mine.get("parameters") or {}).get("bytes")
    modules = len(((trace.facts.get("modules") or [])[rank:rank + 1] or [[]])[0] or [])
    share = _share(trace, rank)
    mesh_words = _mesh_share(trace, rank)
    gathers = ("gathers", plural(modules, "module")) if modules else ("gathers all",)
    # What the run did with the gathered parameters, from its spans: freed after each forward (the default), or kept
    # whole for the backward (reshard_after_forward=False), which then gathers nothing.
    spans = Counter(s.phase for s in trace.spans_of(step) if s.lane == rank)
    after = ("frees them after" if spans["reshard"] else
             "keeps them whole for its backward" if config.train else "keeps them whole")
    cells = {
        "input": Cell((plural(rows, "row"), "its own"), hover=f"{name} reads its own rows (its DistributedSampler shard)"),
        # Four lines at most in a box, the bytes included: two ranks' One step on a projector's first screen. The
        # loss is the hover's, as the backward's module count (the forward's box gives it).
        "forward": Cell((mesh_words if mesh_words else _holds(share)) + gathers,
                        hover=f"{name} holds " + (mesh.shares_words(trace, rank) if mesh_words else
                                                  f"1/{ranks} of each parameter")
                              + (f" ({human_bytes(params)})" if params is not None else "")
                              + f"; it gathers each of the {plural(modules, 'sharded module')}' whole parameters for its "
                              f"forward and {after}" + ("; then the loss" if config.train else "")),
    }
    if not config.train:
        cells["backward"] = idle("forward only: turn training on to see the gradients reduce-scattered")
        cells["update"] = idle("forward only")
        return cells
    grads = (mine.get("gradients") or {}).get("bytes")
    keeps = ("keeps its shards",) if mesh_words else (("keeps 1/" + share.split("/")[1],) if "/" in share else
                                                      ("keeps", share))
    again = spans["gather_backward"]
    cells["backward"] = Cell((("gathers",) if again else ("no all-gather",)) + keeps,
                             hover=(f"{name} gathers each module's parameters again, and keeps only " if again else
                                    f"{name} gathers nothing, its modules whole since the forward; it keeps only ")
                                   + ("the gradients of its shards, as it holds the parameters" if mesh_words else
                                      f"its 1/{ranks} of the summed gradients")
                                   + (f" ({human_bytes(grads)})" if grads is not None else ""))
    state = (mine.get("optimizer state") or {}).get("bytes")
    if params == 0:  # dim 0 of every parameter had fewer rows than there are ranks: this one got none
        cells["update"] = idle(f"{name} holds no rows of any parameter: nothing to step")
        return cells
    cells["update"] = update_cell(trace, rank, f"its own shard ({share}) of every parameter", params, state)
    return cells


def _mesh_share(trace: Trace, rank: int) -> tuple[str, ...]:
    """On a mesh, a rank's two shares on one line: 'holds 1/4 cut, 1/2 rest' (of what tensor parallelism cuts, of what it
    leaves whole); () for a run of FSDP alone."""
    if not mesh.on_mesh(trace):
        return ()
    dp, tp = mesh.mesh_degrees(trace)
    return (f"holds 1/{dp * tp} cut, 1/{dp} rest",)


def _holds(share: str) -> tuple[str, ...]:
    """'holds 1/4' on one line; 'holds' over '196 B' where the share is bytes (a narrow box)."""
    return (f"holds {share}",) if "/" in share else ("holds", share)


def _share(trace: Trace, rank: int) -> str:
    """'1/4' when every rank holds as many bytes of the parameters; else this rank's bytes ('none' for 0). FSDP2
    pads every shard to the same rows, so its ranks allocate alike; a trace that counted real rows only differs."""
    sizes = [(held(trace, r).get("parameters") or {}).get("bytes") for r in range(len(trace.lanes))]
    mine = sizes[rank]
    if mine is None or len(set(sizes)) == 1:
        return f"1/{len(sizes)}"
    return human_bytes(mine) if mine else "none"


def one_step_fsdp(trace: Trace, step: int) -> OneStep:
    if not mesh.on_mesh(trace):
        return one_step_ranks(trace, step, COLLECTIVES, fsdp_cells, HOVERS,
                              handed_words="each collective's tensors on each rank (an all-gather's whole output)")
    drawn = one_step_ranks(trace, step, MESH_COLLECTIVES, fsdp_cells, MESH_HOVERS,
                           handed_words="each collective's tensors on each rank (an all-gather's whole output)")
    dp, tp = mesh.mesh_degrees(trace)
    note = f"{dp} × {tp} mesh: {mesh.groups_words(trace)}, the all-reduces on every layer's critical path"
    backward = next((each for each in mesh.collectives(trace, step) if each.name == "all-reduce (backward)"), None)
    if backward is not None:
        note += (f"; not drawn: backward's {plural(backward.calls, 'all-reduce')} in the {mesh.TP} group (Megatron's f, "
                 f"{human_bytes(backward.handed)} on rank 0)")
    return dataclasses.replace(drawn, notes=(*drawn.notes, note))


def one_step_fsdp_figure(trace: Trace, step: int) -> go.Figure:
    """FSDP's step, drawn as every engine's is."""
    return one_step_figure(one_step_fsdp(trace, step))
