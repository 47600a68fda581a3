"""Batches and steps are numbered from 1 wherever a reader sees them; traces keep 0-based indices."""
import pytest

from dpviz.analysis.wording import numbered, numbered_range


def test_numbered_counts_from_one():
    assert numbered(0, 4, "batch") == "batch 1 of 4"
    assert numbered(3, 4, "batch") == "batch 4 of 4"
    assert numbered(1999, 2000, "step") == "step 2,000 of 2,000"


def test_numbered_range_counts_from_one_and_collapses_a_single_index():
    assert numbered_range(0, 7, 20, "batches") == "batches 1-8 of 20"
    assert numbered_range(2, 2, 20, "batches") == "batch 3 of 20"
    assert numbered_range(4, 4, 9, "steps") == "step 5 of 9"


@pytest.mark.parametrize("n, word, said", [(1, "step", "its one step"), (2, "batch", "both batches"),
                                           (3, "step", "all 3 steps"), (1000, "batch", "all 1,000 batches")])
def test_every_one_of_a_count_is_said_as_a_person_says_it(n, word, said):
    from dpviz.analysis.wording import all_of
    assert all_of(n, word) == said
