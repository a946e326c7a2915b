"""Which event loop a component runs on: its default, or the environment's; unknown: refused."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
import uvloop

from clusterhealth_core import runner


def _loop_of_a_run(monkeypatch: pytest.MonkeyPatch, value: str | None,
                   default: str = runner.UVLOOP) -> tuple[int, list[type]]:
    if value is None:
        monkeypatch.delenv(runner.EVENT_LOOP_ENV, raising=False)
    else:
        monkeypatch.setenv(runner.EVENT_LOOP_ENV, value)
    seen: list[type] = []

    def load(argv: Sequence[str]) -> None:
        return None

    async def serve(_: None) -> None:
        seen.append(type(asyncio.get_running_loop()))

    return runner.main("test", load, serve, argv=[], event_loop=default), seen


def test_components_run_on_uvloop_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _loop_of_a_run(monkeypatch, None) == (0, [uvloop.Loop])
    assert _loop_of_a_run(monkeypatch, "uvloop") == (0, [uvloop.Loop])


@pytest.mark.parametrize(("value", "default"), [("asyncio", runner.UVLOOP),
                                                (None, runner.ASYNCIO)])
def test_the_standard_loop_on_request_or_as_the_default(monkeypatch: pytest.MonkeyPatch,
                                                         value: str | None, default: str) -> None:
    code, seen = _loop_of_a_run(monkeypatch, value, default)
    assert code == 0
    assert len(seen) == 1 and not issubclass(seen[0], uvloop.Loop)
    assert issubclass(seen[0], asyncio.BaseEventLoop)


def test_the_environment_overrides_a_components_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _loop_of_a_run(monkeypatch, "uvloop", runner.ASYNCIO) == (0, [uvloop.Loop])


def test_an_unknown_loop_exits_2_before_starting(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert _loop_of_a_run(monkeypatch, "trio") == (2, [])
    assert "CLUSTERHEALTH_EVENT_LOOP='trio': give 'uvloop' or 'asyncio'" in capsys.readouterr().err
