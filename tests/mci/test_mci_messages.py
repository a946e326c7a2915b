"""Bounded messages: cut on whole items, with a count of what was left out."""

from __future__ import annotations

import pytest

from clusterhealth_mci import messages


def test_short_lists_are_joined_whole() -> None:
    assert messages.listing(["a", "b", "c"], 100) == "a; b; c"
    assert messages.listing([], 10) == ""


def test_long_lists_are_cut_on_whole_items_with_a_count() -> None:
    items = [f"cluster-{i:04d}" for i in range(5000)]
    text = messages.listing(items, 200)
    assert len(text) <= 200
    kept = text.split("; ")[:-1]
    assert kept == items[:len(kept)]
    assert text.endswith(f"; ... and {5000 - len(kept)} more")


@pytest.mark.parametrize("limit", [1, 5, 30, 31, 32, 40, 64])
def test_every_limit_is_respected(limit: int) -> None:
    items = ["x" * 30, "y" * 3, "z" * 3]
    text = messages.listing(items, limit)
    assert len(text) <= limit
    if limit >= 30:
        assert text.startswith("x")


def test_a_first_item_too_long_is_cut_itself() -> None:
    text = messages.listing(["a" * 500, "b"], 100)
    assert len(text) <= 100
    assert text.startswith("aaaa")
    assert "more characters)" in text and text.endswith("; ... and 1 more")


def test_truncate_counts_the_characters_left_out() -> None:
    text = "0123456789" * 10
    cut = messages.truncate(text, 50)
    assert len(cut) <= 50
    kept, _, rest = cut.partition("... (")
    assert text.startswith(kept)
    assert rest == f"{len(text) - len(kept)} more characters)"
    assert messages.truncate("short", 50) == "short"
    assert messages.truncate(text, 3) == "012"
