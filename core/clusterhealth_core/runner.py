"""The life of a component's process: exit codes, signals, serving, leader election.

Every component's ``__main__`` is ``runner.main(...)`` and its ``serve``
ends in :func:`run_until_signalled`, so start-up errors, SIGTERM handling and
leader election behave the same everywhere and are written once.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from clusterhealth_core import clock as clocks
from clusterhealth_core import election, serving, settings
from clusterhealth_core.kube import client as kube

log = logging.getLogger(__name__)

Parsed = TypeVar("Parsed")


class StartupError(RuntimeError):
    """The component cannot start (exit code 1); the message says why."""


def main(
    prog: str,
    load: Callable[[Sequence[str]], Parsed],
    serve: Callable[[Parsed], Coroutine[Any, Any, None]],
    argv: Sequence[str] | None = None,
) -> int:
    """Exit 2 on bad flags or files, 1 when the component cannot start, 0 on shutdown."""
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        parsed = load(sys.argv[1:] if argv is None else argv)
    except settings.SettingsError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(parsed))
    except StartupError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    return 0


async def run_until_signalled(work: Coroutine[Any, Any, None],
                              server: serving.HealthServer | None = None) -> None:
    """Serve health/metrics and run ``work`` until it ends or SIGTERM/SIGINT arrives."""
    if server is not None:
        await server.start()
    task = asyncio.create_task(work)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    try:
        await task
    except asyncio.CancelledError:
        log.info("shutting down")
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        if server is not None:
            await server.stop()


async def run_elected(
    api: kube.ApiClient,
    enabled: bool,
    config: election.ElectionConfig,
    lead: election.LeadFunction,
    on_change: Callable[[bool], None],
    clock: clocks.Clock,
) -> None:
    """Run ``lead`` while holding the Lease (or at once when election is disabled)."""
    if not enabled:
        on_change(True)
        await lead()
        return
    elector = election.LeaderElector(api, config, clock=clock, on_change=on_change)
    await elector.run(lead)
