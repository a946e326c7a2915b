"""Condition and Event messages stay within their budget and say what they left out."""

from __future__ import annotations

from clusterhealth_mci import controller


def test_long_lists_are_cut_with_a_count() -> None:
    parts = [f"Service web-{i:04d} has no port named 'http' in member1" for i in range(3000)]
    text = controller._bounded(parts)
    assert len(text) <= controller.CONDITION_MESSAGE_BUDGET
    shown = text.split("; ")
    assert shown[0] == parts[0]
    assert text.endswith(f"\u2026 and {3000 - len(shown)} more")  # the last part carries it


def test_one_long_part_does_not_hide_the_others() -> None:
    text = controller._bounded(["x" * 10_000, "change the MCI's backend port"], 1000)
    assert len(text) <= 1000
    assert text.endswith("; change the MCI's backend port")
    assert "cut from 10000 characters" in text


def test_short_messages_are_whole() -> None:
    assert controller._bounded(["a", "b"]) == "a; b"
