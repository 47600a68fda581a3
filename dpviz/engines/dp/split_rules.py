"""The rows each replica of a DataParallel call gets, in plain integers: scatter_kwargs without torch.

    replica_rows(config, rows)   # [3, 3, 3, 0] for 9 rows over 4 devices with a keyword argument

One entry per replica DataParallel runs, in device order: the rows of the batch it receives. A loaded
trace is checked against it (dpviz.engines.dp.check), so it imports no torch; tests/test_split_rules.py
checks it against the real scatter path (dpviz.engines.dp.scatter on shape-only tensors) for every model,
input form, device count and many batch sizes, and tests/test_inputs.py against torch's own scatter_kwargs.

The rules, from torch/nn/parallel/scatter_gather.py (ported in dpviz.engines.dp.scatter):

1. scatter cuts every tensor along `dim` with torch.chunk (`chunk_sizes`): at most one chunk per device,
   and fewer when the sizes do not come out even (9 rows over 4 devices are 3 chunks of 3).
2. Any other object (a float, a string, a list of row ids, a container with no tensor inside) is handed
   to every device whole: it makes one piece per device, so it never limits the count.
3. Tuples, lists and dicts zip their items' pieces with a plain zip(): the item with the fewest pieces
   decides how many replicas run (a GRU's h0 cut on its layer dim has one piece, so one replica runs).
4. scatter_kwargs pads the positional pieces with empty tuples when the keyword arguments made more
   pieces: those replicas run with no tensor at all, so they get 0 rows.
5. A replica's rows are those of its first tensor, the batch itself, which comes first in every form.
"""
from __future__ import annotations

from typing import Optional

from dpviz.config import RunConfig
from dpviz.engines.dp.chunking import chunk_sizes
from dpviz.trace.own_model import leaves_of

# A leaf of a call's arguments as scatter meets it: a tensor's length along the scatter dim, or WHOLE
# for an object scatter hands every device whole (rule 2).
Leaf = Optional[int]
WHOLE: Leaf = None
H0_LAYERS = 1  # dpviz.engines.workload.input_forms builds a GRU's h0 as (1, rows, hidden): its GRUs have one layer


def replica_rows(config: RunConfig, rows: int, own: dict | None = None) -> list[int]:
    """Rows each replica gets of a `rows`-row batch under `config`'s model, input form and device count; `own`:
    the user's module's facts["model"] (dpviz.trace.own_model), whose batch layout replaces the input form's."""
    gpus = config.gpus
    positional, keywords = leaves_of(own, rows) if own is not None else call_leaves(config.inputs, rows, config.dim)
    chunks = chunk_sizes(rows, gpus)  # the batch's own chunks: rule 5
    # Rules 1-3: zip() nests, so the count is the fewest pieces of any leaf, however deep it sits. Each of
    # these replicas gets a piece of the positional arguments, the batch's chunk among them.
    with_input = min(pieces(leaf, gpus) for leaf in positional)
    replicas = with_input
    if keywords:  # scatter_kwargs scatters keywords only when there are some
        replicas = max(replicas, min(pieces(leaf, gpus) for leaf in keywords))  # rule 4
    return [chunks[i] if i < with_input else 0 for i in range(replicas)]


def pieces(leaf: Leaf, gpus: int) -> int:
    """How many pieces scatter makes of one leaf over `gpus` devices (rules 1 and 2)."""
    return gpus if leaf is WHOLE else len(chunk_sizes(leaf, gpus))


def call_leaves(form: str, rows: int, dim: int) -> tuple[tuple[Leaf, ...], tuple[Leaf, ...]]:
    """The leaves of one call in input form `form` (dpviz.engines.workload.input_forms.call_args), positional then keyword, for a
    batch of `rows` rows on `dim`; the batch x comes first and holds `rows` along `dim` in every form
    (dpviz.engines.workload.tutorial_data.model_input puts time first for a dim-1 model)."""
    if form == "tensor":
        return (rows,), ()
    if form == "tuple":
        # (x, weight): the weight holds a number per row, and under dim 1 it is reshaped to (1, rows) so
        # that it splits along dim 1 as x does.
        return (rows, rows), ()
    if form == "dict":
        # {"x": x, "weight": weight}: each item is a (key, value) pair, and a key is a string, handed whole.
        return (WHOLE, rows, WHOLE, rows), ()
    if form == "kwargs":
        # x, scale=0.5: the float keyword makes one piece per device, so the padding of rule 4 can apply.
        return (rows,), (WHOLE,)
    if form == "list":
        # x, row_ids: a list of ints holds no tensor, so every device gets all of it (an empty one too).
        return (rows, WHOLE), ()
    if form == "hidden":
        # x, h0 of shape (layers, rows, hidden): on dim 0 scatter cuts it on its layers, one chunk in all.
        return (rows, (H0_LAYERS, rows)[dim]), ()
    raise ValueError(f"no split rule for input form {form!r}")
