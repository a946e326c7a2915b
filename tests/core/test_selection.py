"""The one ``'*,-name'`` syntax for detectors, plugins and controllers."""

from __future__ import annotations

import pytest

from clusterhealth_core import selection

KNOWN = ["a", "b", "c"]


@pytest.mark.parametrize(("items", "expected"), [
    ("*", ["a", "b", "c"]),
    ("*,-b", ["a", "c"]),
    ("-b,*", ["a", "c"]),
    ("c,a", ["c", "a"]),
    ("c,*", ["c", "a", "b"]),
    (" a , ,b ", ["a", "b"]),
    ("", []),
    ("a,-a", []),
    (["b", "-c", "*"], ["b", "a"]),
])
def test_selection(items: str | list[str], expected: list[str]) -> None:
    assert selection.select(KNOWN, items, "part") == expected


@pytest.mark.parametrize("items", ["d", "*,-d", "A"])
def test_unknown_names_are_refused_with_the_known_ones(items: str) -> None:
    with pytest.raises(selection.UnknownName, match=r"unknown part .*; known parts: a, b, c"):
        selection.select(KNOWN, items, "part")
