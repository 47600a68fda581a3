"""A rank's box on the FSDP × TP mesh: its words fit the box on the narrowest chart and its lines the box's height at a
projector's type, each share told as fully as the room leaves, what finds no room counted (the hover names all)."""
from __future__ import annotations

from fractions import Fraction

import pytest

from dpviz.engines.fsdp.read.mesh_fit import (NOTE_SIZE, PRESENTING, box_lines, box_width_px, fits, fraction_words,
                                              rank_lines)
from dpviz.figures.sizes import LINE_EM, MARGIN, PROJECTOR_PX
from dpviz.figures.text_fit import text_px

# The names torch gives the parameters of two models of the catalogue (nn.Sequential's and the transformer's).
FFN = [(Fraction(1, 2), ["net.2.bias"]), (Fraction(1, 4), ["net.0.weight", "net.0.bias", "net.2.weight"])]
TRANSFORMER = [(Fraction(3, 5), ["embed.weight"]),
               (Fraction(1, 2), ["position.weight"] + [f"blocks.{b}.{n}" for b in range(3)
                                                      for n in ("attention_norm.weight", "mlp_norm.bias", "mlp.2.bias")]),
               (Fraction(1, 4), [f"blocks.{b}.attention.{n}.weight" for b in range(3) for n in ("wq", "wk", "wv")])]
MANY = [(Fraction(1, k), [f"layer{k}.weight"]) for k in range(2, 12)]  # more shares than any box holds


@pytest.mark.parametrize("shares", [FFN, TRANSFORMER, MANY])
@pytest.mark.parametrize("dp", [1, 2, 4, 8])
def test_every_line_fits_the_box_on_the_narrowest_chart_and_on_a_projector(shares, dp):
    lines = rank_lines(3, "dp_shard 1, tp 1", shares, dp)
    usual_px = 0.8 * (440 - MARGIN["l"] - MARGIN["r"]) / dp  # the narrowest chart's plot, its columns' boxes
    projector_px = 0.8 * (PROJECTOR_PX - (MARGIN["l"] + MARGIN["r"]) * PRESENTING) / dp
    for line in lines:
        assert text_px(line, NOTE_SIZE) <= usual_px, (dp, line)
        assert text_px(line, NOTE_SIZE * PRESENTING) <= projector_px, (dp, line)
    # the box is 0.76 of a row of 150 px: its lines at the projector's type stay inside it
    assert len(lines) * NOTE_SIZE * PRESENTING * LINE_EM <= 0.76 * 150, lines
    assert lines and lines[0] in ("<b>rank 3</b>", "<b>3</b>")


def test_a_box_with_room_names_every_parameter_in_order_of_share():
    lines = rank_lines(0, "dp_shard 0, tp 0", FFN, dp=2)
    said = " ".join(lines)
    assert said.index("1/2 of") < said.index("1/4 of")
    for _, names in FFN:
        for name in names:
            assert name in said, (name, lines)


def test_a_share_too_long_to_list_is_counted_and_the_rest_said_as_counted():
    lines = rank_lines(0, "dp_shard 0, tp 0", TRANSFORMER, dp=2)
    said = " ".join(lines)
    for share, names in TRANSFORMER:  # each share is there, by its names or by their count
        assert f"{fraction_words(share)} of" in said
        assert all(name in said for name in names) or f"{len(names)} tensor" in said, (names, lines)


def test_shares_that_find_no_line_are_counted_on_the_last():
    lines = rank_lines(0, "dp_shard 0, tp 0", MANY, dp=2)
    assert len(lines) == box_lines(150)
    told = sum(1 for line in lines if " of " in line)
    assert lines[-1] == f"and {len(MANY) - told} more"


def test_a_long_name_is_never_cut_mid_word():
    name = "blocks.0.attention.wq.weight"
    assert not fits(name, box_width_px(2))  # wider than a box: it cannot be listed
    said = " ".join(rank_lines(0, "dp_shard 0, tp 0", [(Fraction(1, 4), [name])], dp=2))
    assert "blocks." not in said and "1/4 of 1 tensor" in said
