"""Batches and steps are numbered from 1 wherever a reader sees them; traces keep 0-based indices."""
from dpviz.analysis.wording import numbered, numbered_range


def test_numbered_counts_from_one():
    assert numbered(0, 4, "batch") == "batch 1 of 4"
    assert numbered(3, 4, "batch") == "batch 4 of 4"
    assert numbered(1999, 2000, "step") == "step 2,000 of 2,000"


def test_numbered_range_counts_from_one_and_collapses_a_single_index():
    assert numbered_range(0, 7, 20, "batches") == "batches 1-8 of 20"
    assert numbered_range(2, 2, 20, "batches") == "batch 3 of 20"
    assert numbered_range(4, 4, 9, "steps") == "step 5 of 9"
