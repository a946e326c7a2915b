"""The life of a component's process: exit codes, signals, serving, leader election.

Every component's ``__main__`` is ``runner.main(...)`` and its ``serve``
ends in :func:`run_until_signalled`, so start-up errors, SIGTERM handling and
leader election behave the same everywhere and are written once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import prometheus_client

from clusterhealth_core import (
    buildinfo,
    collector,
    election,
    events,
    reconcile,
    retry,
    schema,
    serving,
    settings,
    status,
)
from clusterhealth_core import clock as clocks
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, informer, resources

log = logging.getLogger(__name__)

Parsed = TypeVar("Parsed")


class StartupError(RuntimeError):
    """The component cannot start (exit code 1); the message says why."""


def main(
    prog: str,
    load: Callable[[Sequence[str]], Parsed],
    serve: Callable[[Parsed], Coroutine[Any, Any, None]],
    argv: Sequence[str] | None = None,
    *,
    event_loop: str = "uvloop",
) -> int:
    """Exit 2 on bad flags or files, 1 when the component cannot start, 0 on shutdown.

    ``event_loop`` is the component's default loop (:func:`event_loop_factory`);
    ``CLUSTERHEALTH_EVENT_LOOP`` in the environment overrides it.  ``--version``
    prints the version and returns 0 before anything else is read.  While it
    serves, the cycle collector's full collections run on a timer
    (:mod:`clusterhealth_core.collector`).
    """
    arguments = sys.argv[1:] if argv is None else list(argv)
    if "--version" in arguments:
        print(buildinfo.version_line(prog))
        return 0
    buildinfo.disable_created_series()
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    quiet_http_libraries()
    try:
        parsed = load(arguments)
        loop_factory = event_loop_factory(os.environ.get(EVENT_LOOP_ENV, event_loop))
    except settings.SettingsError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    gc.freeze()  # see the note below
    try:
        with asyncio.Runner(loop_factory=loop_factory) as loop_runner:
            loop_runner.run(_collected_on_a_timer(serve(parsed)))
    except StartupError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    return 0


async def _collected_on_a_timer(work: Coroutine[Any, Any, None]) -> None:
    async with collector.on_a_timer():
        await work


# Why gc.freeze() before serving: the modules, classes and settings made at start-up
# (about 40,000 objects the collector tracks, in the remedy controller) live as long as
# the process.  Frozen, the cycle collector no longer walks them on every full
# collection: one took 24 to 30 ms during a remedy controller's first list of 1,000
# Clusters (docs/benchmarks.md, "Remedy controller: start").  Objects made later are
# collected as before; what is frozen is freed by reference counting when dropped.

EVENT_LOOP_ENV = "CLUSTERHEALTH_EVENT_LOOP"
"""Overrides the event loop a component runs on: ``uvloop`` or ``asyncio``."""
UVLOOP = "uvloop"
ASYNCIO = "asyncio"


def event_loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """The loop a process runs on (decision 0006).

    uvloop (libuv's loop and its own TLS transport) took a sixth of the remedy
    controller's CPU per status write off at 5,000 Clusters, CPU it shares with
    the API server: the controllers run on it.  ``asyncio`` is the standard
    library's loop: the agent's default (a few requests a second on every
    node, where the megabyte uvloop adds counts more), and the way to rule
    uvloop out when something misbehaves.
    """
    if name == ASYNCIO:
        return asyncio.new_event_loop
    if name == UVLOOP:
        import uvloop  # here, not at the top: the agent never loads it

        return uvloop.new_event_loop
    raise settings.SettingsError(
        f"{EVENT_LOOP_ENV}={name!r}: give {UVLOOP!r} or {ASYNCIO!r}")


def quiet_http_libraries() -> None:
    """Keep httpx/httpcore's per-request INFO lines out of the log (a probe every 5 s each)."""
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)


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


LeadWork = Callable[[kube.ApiClient], Coroutine[Any, Any, None]]
"""The leader's work: it gets the client to write through, fenced by the elector."""
ExitFunction = Callable[[int], None]
EXIT_WORK_STUCK = 3
"""Exit code when the leader's work did not stop after leadership was lost."""
EVENT_CLOSE_TIMEOUT = 1.5
"""Seconds a term's end waits for its queued Events, at most a third of the elector's stop
timeout (by default 5 s: ``lease_duration - renew_deadline``)."""


async def run_elected(
    api: kube.ApiClient,
    enabled: bool,
    config: election.ElectionConfig,
    lead: LeadWork,
    on_change: Callable[[bool], None],
    clock: clocks.Clock,
    *,
    writes: kube.ApiClient | None = None,
    server: serving.HealthServer | None = None,
    exit_process: ExitFunction = os._exit,
) -> None:
    """Run ``lead`` while holding the Lease (or at once when election is disabled).

    The Lease lives where ``api`` points; ``lead`` gets ``writes`` (default:
    ``api``) guarded by the elector's fence, so none of its writes is sent
    unless this process validly leads.  With ``server``, the elector's
    liveness check is registered.  Work that does not stop after leadership
    is lost ends the process (see :func:`lead_while_elected`).
    """
    target = api if writes is None else writes
    if not enabled:
        on_change(True)
        await lead(target)
        return
    elector = election.LeaderElector(api, config, clock=clock, on_change=on_change)
    if server is not None:
        server.add_liveness("leader-election", elector.healthy)
    await lead_while_elected(elector, lead, target, exit_process)


async def lead_while_elected(elector: election.LeaderElector, lead: LeadWork,
                             writes: kube.ApiClient,
                             exit_process: ExitFunction = os._exit) -> None:
    """``elector.run`` with ``lead`` writing through the fenced ``writes``.

    When the work ignores its cancellation for the stop timeout after
    leadership was lost (or at shutdown), the process exits with
    :data:`EXIT_WORK_STUCK` at once (``os._exit``: no clean-up that could wait
    for the stuck work), so that its Deployment or DaemonSet restarts it.
    """
    fenced = writes.guarded(elector.check_fence)
    try:
        await elector.run(lambda: lead(fenced))
    except election.WorkDidNotStop as exc:
        log.critical("%s; exiting with code %d so that the process is restarted",
                     exc, EXIT_WORK_STUCK)
        for handler in logging.getLogger().handlers:
            with contextlib.suppress(Exception):
                handler.flush()
        exit_process(EXIT_WORK_STUCK)
        raise


async def check_served(api: kube.ApiClient, needed: Sequence[resources.Resource],
                       hint: str) -> None:
    """Fail start-up with one clear message unless every ``needed`` API is served."""
    try:
        for resource in needed:
            async for _ in api.list_pages(resource, limit=1):
                break  # one object is enough to know the API is served
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


_DISCOVERY_BACKOFF = retry.Backoff(initial=1.0, maximum=30.0, attempts=1_000_000)


class ProcessMetrics:
    """The metric families every controller process exports, made once per registry."""

    def __init__(self, registry: prometheus_client.CollectorRegistry) -> None:
        self.controllers = reconcile.ControllerMetrics(registry)
        self.informers = informer.InformerMetrics(registry)
        self.events = events.EventMetrics(registry)
        self.schema = status.SchemaMetrics(registry)


@dataclasses.dataclass(frozen=True)
class Term:
    """What one term of leadership gives the controllers it runs.

    Everything here is fresh for the term and stopped with it: the shared
    informers (one per resource, started once the controllers have asked
    for theirs), the Event recorder, and the client, fenced by the elector.
    """

    api: kube.ApiClient
    informers: informer.InformerFactory
    recorder: events.EventRecorder
    metrics: ProcessMetrics
    clock: clocks.Clock
    writes: bool = True
    """False for a standby's term (:class:`ElectedController` ``standby=True``): the
    controller must write nothing (no status, finalizer or Event); its client is not fenced."""

    async def status_writer(self, resource: resources.Resource, field_manager: str,
                            fields: frozenset[str],
                            condition_types: frozenset[str] = frozenset(),
                            nested: Mapping[str, frozenset[str]] | None = None
                            ) -> status.StatusWriter:
        """A writer for ``resource``'s status as this server holds it (asks until it can).

        Reads the server's discovery and schema once; while the server cannot
        be asked, tries again with a backoff (the term has nothing to write yet).
        """
        attempt = 0
        while True:
            try:
                kind = await schema.discover(self.api, resource)
            except (errors.KubeError, OSError) as exc:
                delay = _DISCOVERY_BACKOFF.delay(min(attempt, 8))
                attempt += 1
                log.warning("reading the schema of %s failed (%s); again in %.1fs",
                            resource.crd_name, exc, delay)
                await self.clock.sleep(delay)
                continue
            return status.StatusWriter(self.api, kind, field_manager, fields, condition_types,
                                       self.metrics.schema, dict(nested or {}))


@dataclasses.dataclass(frozen=True)
class TermSettings:
    """How a term's shared parts are made."""

    component: str
    event_namespace: str = "default"
    informers: informer.InformerSettings = dataclasses.field(
        default_factory=informer.InformerSettings)


class ElectedController:
    """One replica: campaigns for the Lease and runs a fresh controller while leading.

    A new controller (fresh caches) is made for every term, so nothing learnt
    under an earlier leadership is trusted; ``make`` gets the :class:`Term`,
    whose client is fenced by the elector, so the controller's writes stop as
    soon as this replica may no longer lead.  Readiness: ready while standing
    by, and while leading once the controller's caches are synced and every
    informer is in contact with the server.  Liveness: the elector's
    (renewals not stalled).

    With ``standby=True`` a standby runs a controller too, on a term with
    ``writes=False`` (it must only read and drive things of its own, such as
    the MCI provider's HAProxy beside it), stopped before this replica leads
    and started again when it stops leading.  Its readiness is then the
    standby controller's, so a replica is Ready once its own work is synced.
    """

    def __init__(self, api: kube.ApiClient, enabled: bool, config: election.ElectionConfig,
                 clock: clocks.Clock, make: Callable[[Term], Controller],
                 leader_gauge: prometheus_client.Gauge,
                 *,
                 metrics: ProcessMetrics,
                 term: TermSettings,
                 on_stop: Callable[[], None] | None = None,
                 standby: bool = False,
                 leadership: buildinfo.Leadership | None = None,
                 exit_process: ExitFunction = os._exit) -> None:
        self.api = api
        self.leadership = leadership
        self.enabled = enabled
        self.config = config
        self.clock = clock
        self.make = make
        self.leader_gauge = leader_gauge
        self.metrics = metrics
        self.term_settings = term
        self.on_stop = on_stop
        self.standby = standby
        self.exit_process = exit_process
        self._standing_by: asyncio.Task[None] | None = None
        self.current: Controller | None = None
        self.informers: informer.InformerFactory | None = None
        self.elector = election.LeaderElector(
            api, config, clock=clock, on_change=self._on_leadership) if enabled else None

    async def lead(self, api: kube.ApiClient) -> None:
        """The leader's work, writing through ``api``."""
        await self._term(api, writes=True)

    async def _term(self, api: kube.ApiClient, *, writes: bool) -> None:
        factory = informer.InformerFactory(api, settings=self.term_settings.informers,
                                           clock=self.clock, metrics=self.metrics.informers)
        recorder = events.EventRecorder(
            api, self.term_settings.component, self.clock,
            namespace=self.term_settings.event_namespace, instance=self.config.identity,
            metrics=self.metrics.events)
        self.current = self.make(Term(api, factory, recorder, self.metrics, self.clock,
                                      writes=writes))
        self.informers = factory
        factory.start()
        recording = asyncio.create_task(recorder.run(), name="events")
        try:
            await self.current.run()
        finally:
            await recorder.close(self._event_close_timeout())  # held Events, not lost
            recording.cancel()
            await asyncio.gather(recording, return_exceptions=True)
            await factory.stop()
            self.current = None
            self.informers = None
            if self.on_stop is not None:
                self.on_stop()

    def _event_close_timeout(self) -> float:
        """:data:`EVENT_CLOSE_TIMEOUT`, at most a third of the time the work has to stop."""
        if self.elector is None:
            return EVENT_CLOSE_TIMEOUT
        return min(EVENT_CLOSE_TIMEOUT, self.elector.config.work_stop_timeout / 3)

    def _on_leadership(self, leading: bool) -> None:
        self.leader_gauge.set(1 if leading else 0)  # the component's own name, one release more
        if self.leadership is not None:
            self.leadership.set(leading)

    def ready(self) -> tuple[bool, str]:
        """A readiness check for :class:`~clusterhealth_core.serving.HealthServer`."""
        current, factory = self.current, self.informers
        if current is None:
            return True, "standing by"
        if not current.synced:
            return False, "caches syncing"
        return factory.health() if factory is not None else (True, "caches synced")

    def alive(self) -> tuple[bool, str]:
        """A liveness check for :class:`~clusterhealth_core.serving.HealthServer`."""
        if self.elector is None:
            return True, "leader election disabled"
        return self.elector.healthy()

    async def run(self) -> None:
        """Run until cancelled."""
        if self.elector is None:
            self._on_leadership(True)
            await self.lead(self.api)
            return
        if not self.standby:
            await lead_while_elected(self.elector, self.lead, self.api, self.exit_process)
            return
        self._stand_by()
        try:
            await lead_while_elected(self.elector, self._lead_after_standby, self.api,
                                     self.exit_process)
        finally:
            await self._stop_standing_by()

    def _stand_by(self) -> None:
        self._standing_by = asyncio.create_task(self._term(self.api, writes=False),
                                                name="standby-work")

    async def _stop_standing_by(self) -> None:
        task, self._standing_by = self._standing_by, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _lead_after_standby(self, api: kube.ApiClient) -> None:
        """Stop the standby's controller, lead with a fresh one, stand by again after."""
        await self._stop_standing_by()
        try:
            await self.lead(api)
        finally:
            self._stand_by()
