"""The suite's one waiting loop (``testkit.eventually`` on the harness's ``waiting``).

Every test that waits goes through it, so what it promises is tested here:
plain and async checks, API errors as "not yet" (or not, when narrowed), the
awaited state named in the failure, and giving up at once when the process
under test has exited.
"""

from __future__ import annotations

import itertools
import time

import pytest

import testkit
from clusterhealth_core.kube import errors


async def test_returns_the_first_truthy_result_of_a_plain_or_async_check() -> None:
    counter = itertools.count()
    assert await testkit.eventually(lambda: next(counter) >= 3 and "done", interval=0.001) == \
        "done"

    async def check() -> int | None:
        value = next(counter)
        return value if value >= 6 else None

    assert await testkit.eventually(check, interval=0.001) == 6


async def test_api_errors_are_not_yet_unless_narrowed() -> None:
    calls = itertools.count()

    async def flaky() -> bool:
        if next(calls) < 2:
            raise errors.NotFound(404, "NotFound", "not yet")
        return True

    assert await testkit.eventually(flaky, interval=0.001) is True

    async def forbidden() -> bool:
        raise errors.Forbidden(403, "Forbidden", "no")

    with pytest.raises(errors.Forbidden):
        await testkit.eventually(forbidden, interval=0.001, not_yet=(errors.NotFound,))


async def test_a_timeout_names_what_was_awaited_and_the_last_answer() -> None:
    with pytest.raises(AssertionError, match=r"the answer: not reached within 0.05s \(last: 0\)"):
        await testkit.eventually(lambda: 0, timeout=0.05, what="the answer", interval=0.01)


class Exited:
    def running(self) -> bool:
        return False

    def log_tail(self, lines: int = 40) -> str:
        return "panic: the end"


async def test_gives_up_at_once_when_the_process_has_exited() -> None:
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"(?s)the process exited.*panic: the end"):
        await testkit.eventually(lambda: False, timeout=30, what="ready", process=Exited())
    assert time.monotonic() - started < 5
