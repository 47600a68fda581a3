"""dpviz.engines.dp.split_rules (plain integers) against the real scatter path as the oracle.

The oracle is what a simulated run does with a batch: dpviz.engines.workload.tutorial_data.call lays it out in the run's input
form, and dpviz.engines.dp.scatter.scatter_kwargs (the port of torch's, checked against torch's own in
test_scatter.py) splits it; here on shape-only (meta) tensors, so even the largest batch costs no memory.
A replica's rows are those of its first tensor, 0 for a replica that got none. The integer rule must
give the same list for every model and input form a config allows, 1..16 devices, and batches with fewer
rows than devices, one row, sizes that do not divide and sizes that do. tests/test_inputs.py checks the
same rule against torch's own scatter_kwargs too.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

from dpviz.engines.workload import input_forms as inputs
from dpviz.catalogue import INPUT_SPECS, MODEL_SPECS, row_shape

# The page's models and forms; a module of the user's own splits by its batch's recorded layout (tests/test_own_model.py).
MODEL_SPECS = {name: spec for name, spec in MODEL_SPECS.items() if spec.listed}
INPUT_SPECS = {name: spec for name, spec in INPUT_SPECS.items() if spec.listed}
from dpviz.config import LIMITS, ConfigError, RunConfig
from dpviz.engines.dp import scatter
from dpviz.engines.dp.chunking import chunk_sizes
from dpviz.engines.dp.split_rules import replica_rows
from dpviz.engines.workload.tutorial_data import call

GPUS = range(1, LIMITS["gpus"][1] + 1)
# Every size up to 40 (0: torch.chunk's special case; below, at and above every device count), then
# powers of two and their neighbours, and primes.
ROWS = [*range(41), 63, 64, 65, 97, 127, 128, 129, 255, 256, 257, 1000, 1009, 4096, 4097]
# Large batches, up to the largest a config allows, on fewer device counts. The list form's oracle walks
# every row id once per device (five seconds for a million rows on 16), so it stops at the first.
LARGE_ROWS = [65_537, 100_003, LIMITS["batch_size"][1]]
LARGE_GPUS = (1, 3, 7, 8, 16)


def allowed(model: str, form: str) -> RunConfig | None:
    """A DataParallel config of `model` taking input form `form`, or None when no config allows the pair."""
    try:
        return RunConfig(model=model, inputs=form, backend="simulated")
    except ConfigError:
        return None


CASES = [(model, form) for model in MODEL_SPECS for form in INPUT_SPECS if allowed(model, form)]
# One model per batch dim and layer cut, for the large batches: the model enters the rule through
# nothing else.
LARGE_CASES = [(model, form) for model, form in CASES if model in ("linear", "gru", "gru_dim1")]


def oracle_rows(config: RunConfig, rows: int) -> list[int]:
    """Rows of each replica's first tensor when the simulation's scatter splits a `rows`-row batch."""
    data = torch.empty(rows, *row_shape(config.model, config.input_size), device="meta")
    args, kwargs = call(config, data, list(range(rows)))
    pieces, _ = scatter.scatter_kwargs(args, kwargs, list(range(config.gpus)), dim=config.dim)
    firsts = [inputs.first_tensor(piece) for piece in pieces]
    return [t.shape[config.dim] if t is not None else 0 for t in firsts]


def test_every_model_and_input_form_is_covered():
    """The catch in `allowed` refuses only the pairs the config refuses: hidden states on non-GRU models, and
    forms a model of token ids does not take."""
    recurrent = [name for name, spec in MODEL_SPECS.items() if spec.recurrent]
    limited = {name: spec.inputs for name, spec in MODEL_SPECS.items() if spec.inputs}
    assert recurrent and limited and {model for model, _ in CASES} == set(MODEL_SPECS)
    assert {form for _, form in CASES} == set(INPUT_SPECS)
    assert sorted(model for model, form in CASES if form == "hidden") == sorted(recurrent)
    for model, forms in limited.items():
        assert sorted(form for m, form in CASES if m == model) == sorted(forms)
    free = len(MODEL_SPECS) - len(limited)
    assert len(CASES) == free * (len(INPUT_SPECS) - 1) + len(recurrent) + sum(map(len, limited.values()))


@pytest.mark.parametrize("model,form", CASES)
def test_the_rule_is_the_scatters_split(model, form):
    config = allowed(model, form)
    for gpus in GPUS:
        config = dataclasses.replace(config, gpus=gpus)
        for rows in ROWS:
            assert replica_rows(config, rows) == oracle_rows(config, rows), (model, form, gpus, rows)


@pytest.mark.parametrize("model,form", LARGE_CASES)
def test_the_rule_is_the_scatters_split_for_large_batches(model, form):
    config = allowed(model, form)
    for gpus in LARGE_GPUS:
        config = dataclasses.replace(config, gpus=gpus)
        for rows in LARGE_ROWS[:1] if form == "list" else LARGE_ROWS:
            assert replica_rows(config, rows) == oracle_rows(config, rows), (model, form, gpus, rows)


@pytest.mark.parametrize("model,form,gpus,rows,want", [
    ("linear", "kwargs", 8, 10, [2, 2, 2, 2, 2, 0, 0, 0]),  # 5 chunks, padded to 8 replicas by the keyword
    ("linear", "kwargs", 4, 9, [3, 3, 3, 0]),  # 3 chunks of 3: even rows >= devices can leave one idle
    ("gru", "hidden", 4, 10, [3]),  # h0 cut on its one layer: zip keeps one replica
    ("gru_dim1", "hidden", 4, 10, [3, 3, 3, 1]),  # h0 split on its batch dim, as x
    ("linear", "list", 4, 3, [1, 1, 1]),  # the list of ids goes whole to all 4: x's 3 chunks decide
    ("cnn", "tensor", 16, 1, [1]),  # one row: one replica
])
def test_the_oracle_shows_scatters_quirks(model, form, gpus, rows, want):
    """The oracle comparison can fail: where scatter's zip and padding matter, a rule of chunks alone is
    not the oracle's split, and the integer rule is."""
    config = dataclasses.replace(allowed(model, form), gpus=gpus)
    assert oracle_rows(config, rows) == want == replica_rows(config, rows)
    if form in ("kwargs", "hidden") and model != "gru_dim1":  # torch.chunk alone, without zip or padding
        assert chunk_sizes(rows, gpus) != want
