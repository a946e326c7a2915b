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
from typing import Any, Protocol, TypeVar

import prometheus_client

from clusterhealth_core import clock as clocks
from clusterhealth_core import election, serving, settings
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources

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


async def check_served(api: kube.ApiClient, needed: Sequence[resources.Resource],
                       hint: str) -> None:
    """Fail start-up with one clear message unless every ``needed`` API is served."""
    try:
        for resource in needed:
            await api.list(resource)
    except errors.NotFound as exc:
        kinds = " or ".join(r.kind for r in needed)
        raise StartupError(f"the {kinds} API is not served here: {hint}") from exc
    except errors.Unreachable as exc:
        raise StartupError(f"cannot reach the API server: {exc}") from exc
    except errors.ApiError as exc:
        raise StartupError(f"the API server refused: {exc}") from exc


class Controller(Protocol):
    """What :class:`ElectedController` runs: caches and workers, until cancelled."""

    @property
    def synced(self) -> bool:
        """Whether the caches have loaded."""

    async def run(self) -> None:
        """Run until cancelled."""


class ElectedController:
    """One replica: campaigns for the Lease and runs a fresh controller while leading.

    A new controller (fresh caches) is made for every term, so nothing learnt
    under an earlier leadership is trusted.  Readiness: ready while standing
    by, and while leading once the controller's caches are synced.
    """

    def __init__(self, api: kube.ApiClient, enabled: bool, config: election.ElectionConfig,
                 clock: clocks.Clock, make: Callable[[], Controller],
                 leader_gauge: prometheus_client.Gauge,
                 on_stop: Callable[[], None] | None = None) -> None:
        self.api = api
        self.enabled = enabled
        self.config = config
        self.clock = clock
        self.make = make
        self.leader_gauge = leader_gauge
        self.on_stop = on_stop
        self.current: Controller | None = None

    async def lead(self) -> None:
        """The leader's work."""
        self.current = self.make()
        try:
            await self.current.run()
        finally:
            self.current = None
            if self.on_stop is not None:
                self.on_stop()

    def _on_leadership(self, leading: bool) -> None:
        self.leader_gauge.set(1 if leading else 0)

    def ready(self) -> tuple[bool, str]:
        """A readiness check for :class:`~clusterhealth_core.serving.HealthServer`."""
        current = self.current
        if current is None:
            return True, "standing by"
        return current.synced, "caches synced" if current.synced else "caches syncing"

    async def run(self) -> None:
        """Run until cancelled."""
        await run_elected(self.api, self.enabled, self.config, self.lead, self._on_leadership,
                          self.clock)
