"""An engine's parts are typed: each follows the Protocol its field in dpviz.engines.parts.Parts names, and a part
that does not is found when the engines are registered here, not by the first page that calls it."""
from __future__ import annotations

import dataclasses
import sys
import types

import pytest

from dpviz.engines import ENGINES
from dpviz.engines.conformance import problems
from dpviz.engines.parts import Lazy, Parts, View


@pytest.mark.parametrize("name", list(ENGINES))
def test_every_registered_engines_parts_follow_their_protocols(name):
    parts = ENGINES[name].parts
    named = list(parts.named())
    assert len(named) > 20 and all(isinstance(reference, Lazy) for _, reference, _ in named)
    assert problems(parts) == []


@pytest.fixture
def module(monkeypatch):
    """A module of parts with wrong signatures, importable as tests_wrong_parts."""
    wrong = types.ModuleType("tests_wrong_parts")
    wrong.two_arguments = lambda trace, extra: {}  # dpviz calls summary(trace)
    wrong.no_detail = lambda trace, first_batch, last_batch, *, show: None  # dpviz passes show= and detail=
    wrong.no_batch = lambda trace: None  # Flow is drawn for one batch: flow(trace, batch)
    wrong.not_a_vocabulary = {"phases": []}
    wrong.engine_without_check = types.SimpleNamespace(resolve=lambda config, available=None: config,
                                                       record=lambda config, progress=None, workload=None: None)
    monkeypatch.setitem(sys.modules, "tests_wrong_parts", wrong)
    return wrong


@pytest.mark.parametrize("change, found", [
    ({"summary": "tests_wrong_parts:two_arguments"}, "summary: tests_wrong_parts:two_arguments(trace, extra) cannot be called as (trace)"),
    ({"timeline_range": "tests_wrong_parts:no_detail"},
     "timeline_range: tests_wrong_parts:no_detail(trace, first_batch, last_batch, *, show) cannot be called as "
     "(trace, first_batch, last_batch, show=, detail=)"),
    ({"views": {"flow": "tests_wrong_parts:no_batch"}}, "view.flow: tests_wrong_parts:no_batch(trace) cannot be called as (trace, batch)"),
    ({"vocabulary": "tests_wrong_parts:not_a_vocabulary"}, "vocabulary: tests_wrong_parts:not_a_vocabulary is a dict, not a Vocabulary"),
    ({"engine": "tests_wrong_parts:engine_without_check"}, "engine: tests_wrong_parts:engine_without_check.check is missing"),
    ({"explain": "tests_wrong_parts:nowhere"}, "explain: tests_wrong_parts:nowhere cannot be loaded (AttributeError"),
    ({"own_views": (View("toy", "Toy", "tests_wrong_parts:no_batch", control="batch"),)}, "view.toy: tests_wrong_parts:no_batch(trace)"),
])
def test_a_part_with_a_wrong_signature_is_found_at_registration(module, change, found):
    parts = dataclasses.replace(ENGINES["dp"].parts, **change)
    reported = problems(parts)
    assert len(reported) == 1 and reported[0].startswith(found), reported


def test_parts_refuse_what_is_no_part():
    with pytest.raises(ValueError, match="views \\['toy'\\] are not the toolkit's"):
        dataclasses.replace(ENGINES["dp"].parts, views={"toy": "tests_wrong_parts:no_batch"})
    with pytest.raises(ValueError, match="'module:attribute'"):
        Lazy("dpviz.engines.dp.spec.batches")
    with pytest.raises(ValueError, match="control must be 'whole' or 'batch'"):
        View("toy", "Toy", "m:f", control="window")
    with pytest.raises(TypeError):
        Parts(vocabulary="m:v")  # the parts every engine names are required
