"""An outage is a few log lines: which informer failures are logged, and the recovery line."""

from __future__ import annotations

import logging

import pytest

from clusterhealth_core import runner, settings
from clusterhealth_core.kube import informer


@pytest.mark.parametrize(("messages", "logged"), [
    (["down"], [True]),
    (["down"] * 9, [True, True, False, True, False, False, False, True, False]),
    (["down", "down", "down", "refused", "refused"], [True, True, False, True, False]),
    (["a", "b", "a"], [True, True, True]),
])
def test_first_powers_of_two_and_changes_are_logged(messages: list[str],
                                                    logged: list[bool]) -> None:
    quiet = informer.FailureLog()
    assert [quiet.failed(m) for m in messages] == logged
    assert quiet.attempts == len(messages)


def test_recovery_is_logged_once_and_counting_starts_anew(
        caplog: pytest.LogCaptureFixture) -> None:
    quiet = informer.FailureLog()
    with caplog.at_level(logging.INFO, logger=informer.__name__):
        quiet.recovered("clusters", "watching")  # no failures: nothing to say
        for _ in range(5):
            quiet.failed("down")
        quiet.recovered("clusters", "listed")
        quiet.recovered("clusters", "watching")
    assert [r.getMessage() for r in caplog.records] == [
        "informer clusters: listed again after 5 failed attempts"]
    assert quiet.failed("down") is True  # a new outage is logged from its start


def test_components_do_not_log_every_http_request() -> None:
    def refuse(argv: object) -> None:
        raise settings.SettingsError("no")

    async def never(parsed: object) -> None:
        raise AssertionError("not reached")

    assert runner.main("x", refuse, never, argv=[]) == 2
    for name in ("httpx", "httpcore"):
        assert logging.getLogger(name).getEffectiveLevel() == logging.WARNING
