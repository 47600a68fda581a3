"""The vocabulary an engine declares: checked when declared, read by every view."""
import pytest

from dpviz.engines.dp.vocabulary import VOCABULARY
from dpviz.trace.vocabulary import HOST, Phase, Vocabulary


def test_a_host_phase_without_a_colour_of_its_own_is_refused_when_declared():
    with pytest.raises(ValueError, match="needs a colour of its own"):
        Vocabulary("x", "X", "lane", (Phase("send", HOST, "send", "send"),), ())


def test_dataparallels_phases_are_in_pipeline_order_and_named_once():
    assert VOCABULARY.names == ("scatter", "replicate", "apply", "forward", "gather", "loss", "backward", "reduce", "step")
    assert VOCABULARY.where(HOST) == ("scatter", "replicate", "apply", "gather")
    assert VOCABULARY.lane_name(3) == "GPU 3" and VOCABULARY.phase("reduce").label == "sum of gradients"
    with pytest.raises(KeyError, match="no phase 'teleport'"):
        VOCABULARY.phase("teleport")


def test_a_phase_is_called_by_its_label_in_its_own_hover():
    """One name per phase in every view: a hover that begins with a name begins with the legend's."""
    from dpviz.engines.ddp.vocabulary import VOCABULARY as DDP
    for vocabulary in (VOCABULARY, DDP):
        for phase in vocabulary.phases:
            if phase.name in ("reduce", "step"):
                assert phase.hover.startswith(phase.label + ":"), phase.hover
