"""Waiting for the real system to reach a state, for tests and benchmarks.

Polls an async check until it returns something truthy; a Kubernetes API
error counts as "not yet" (an object may not exist yet, a server may be
restarting), and the last answer is quoted when time runs out.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from clusterhealth_core.kube import errors


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 20.0,
                     interval: float = 0.05) -> Any:
    """Return ``check()``'s first truthy result; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = await check()
        except errors.KubeError as exc:
            last = exc
        if last and not isinstance(last, Exception):
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"not reached within {timeout}s (last: {last!r})")
