"""Waiting for the real system to reach a state, for tests and benchmarks.

The one polling loop of the tests, the demo and the benchmarks: it calls a
check (plain or async) until it returns something truthy.  A Kubernetes API
error counts as "not yet" (an object may not exist yet, a server may be
restarting; ``not_yet`` narrows that, so that a test of permissions fails at
once on Forbidden), and the last answer is quoted when time runs out.  Given
the process under test, it stops as soon as that process has exited and
quotes the end of its log.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from clusterhealth_core.kube import errors


class Watched(Protocol):
    """A process the wait gives up on when it exits (a ``processes.ManagedProcess``)."""

    def running(self) -> bool:
        """Whether the process is still running."""

    def log_tail(self, lines: int = 40) -> str:
        """The end of its log."""


async def eventually(check: Callable[[], Awaitable[Any] | Any], timeout: float = 20.0,
                     interval: float = 0.05, *, what: str = "",
                     not_yet: tuple[type[Exception], ...] = (errors.KubeError,),
                     process: Watched | None = None) -> Any:
    """Return ``check()``'s first truthy result; fail after ``timeout`` seconds.

    ``what`` names the awaited state in the failure; exceptions of the types in
    ``not_yet`` count as "not yet" (any other propagates); with ``process``,
    fail as soon as it is no longer running, quoting its log.
    """
    deadline = time.monotonic() + timeout
    prefix = f"{what}: " if what else ""
    last: Any = None
    while True:
        try:
            last = check()
            if inspect.isawaitable(last):
                last = await last
        except not_yet as exc:
            last = exc
        if last and not isinstance(last, Exception):
            return last
        if process is not None and not process.running():
            raise AssertionError(f"{prefix}the process exited (last: {last!r}):\n"
                                 f"{process.log_tail(60)}")
        if time.monotonic() >= deadline:
            tail = f":\n{process.log_tail(60)}" if process is not None else ""
            raise AssertionError(f"{prefix}not reached within {timeout:g}s "
                                 f"(last: {last!r}){tail}")
        await asyncio.sleep(interval)
