"""The start-up heap is frozen out of the cycle collector's way before a component serves."""

from __future__ import annotations

import gc
from collections.abc import Sequence

import pytest

from clusterhealth_core import runner, settings


def _run(monkeypatch: pytest.MonkeyPatch, refuse: bool) -> tuple[int, list[str]]:
    calls: list[str] = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))  # this test's heap stays

    def load(argv: Sequence[str]) -> None:
        if refuse:
            raise settings.SettingsError("--workers: not a number")

    async def serve(_: None) -> None:
        calls.append("serve")

    return runner.main("test", load, serve, argv=[]), calls


def test_frozen_once_before_serving(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _run(monkeypatch, refuse=False) == (0, ["freeze", "serve"])


def test_bad_flags_exit_before_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _run(monkeypatch, refuse=True) == (2, [])
