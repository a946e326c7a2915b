"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's semantics, fenced.

Every controller runs several replicas and lets exactly one work.  The rules
(see ``docs/leader-election.md``):

* acquire or renew by an update guarded by ``resourceVersion``;
* a candidate may take over only when the record has not changed for the
  record's own ``leaseDurationSeconds`` (the holder's setting), as measured on
  *its own* monotonic clock since it last saw a change (no trust in other
  machines' wall clocks);
* ``leaseTransitions`` is incremented on every change of holder;
* writes are fenced: :meth:`LeaderElector.check_fence` (given to
  ``ApiClient.guarded``) refuses every write unless this process leads and sent
  its last successful renewal less than ``renew_deadline`` ago.  Renewals are
  fenced the same way, so a leader paused past the deadline (SIGSTOP, a long
  GC) writes nothing when it resumes;
* a leader whose renewals have not succeeded for ``renew_deadline`` cancels its
  work and waits for it to stop, at most ``stop_timeout``; work that ignores
  the cancellation makes :meth:`LeaderElector.run` raise :class:`WorkDidNotStop`
  and the process is expected to exit (``runner`` does);
* a standby does not read the Lease every retry period: it watches it and
  tries only when the record was released or may have expired;
* on graceful shutdown the lease is released (empty holder), so the next
  candidate takes over at once.

Unlike the Python ``kubernetes`` client's elector, nothing here exits the
process, timestamps are UTC RFC 3339 with microseconds, and a leader that
loses the lease goes back to being a candidate.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import random
import socket
import uuid
from collections.abc import AsyncGenerator, Callable, Coroutine, Mapping
from typing import Any

from clusterhealth_core import clock as clocks
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources

log = logging.getLogger(__name__)

LeadFunction = Callable[[], Coroutine[Any, Any, None]]
_WATCH_BACKOFF_MAX = 300.0
# The server ends each watch after 5-10 minutes (spread like client-go's reflector):
# in steady state that is a standby's only request to the API server.
_WATCH_SECONDS = (300.0, 600.0)


def default_identity() -> str:
    """``<hostname>_<random>``, unique per process like client-go's examples."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:12]}"


class WorkDidNotStop(RuntimeError):
    """The leader's work did not stop within ``stop_timeout`` of being cancelled.

    It may still be running (and writing through anything but the fenced
    client): the only safe reaction is to end the process.
    """


@dataclasses.dataclass(frozen=True)
class ElectionConfig:
    """Which Lease, who we are, and the timing (client-go defaults 15 s / 10 s / 2 s)."""

    lease_name: str
    lease_namespace: str
    identity: str = dataclasses.field(default_factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True
    stop_timeout: float | None = None
    """How long the work may take to stop once leadership is lost; ``None`` means
    ``lease_duration - renew_deadline`` (see :attr:`work_stop_timeout`)."""

    def __post_init__(self) -> None:
        if not self.lease_name or not self.lease_namespace:
            raise ValueError("leader election: lease name and namespace are required")
        if not self.identity:
            raise ValueError("leader election: identity must not be empty")
        if self.retry_period <= 0:
            raise ValueError("leader election: retry period must be > 0")
        if not self.renew_deadline > self.retry_period:
            raise ValueError(
                f"leader election: renew deadline ({self.renew_deadline}s) must be greater "
                f"than the retry period ({self.retry_period}s)"
            )
        if not self.lease_duration > self.renew_deadline:
            raise ValueError(
                f"leader election: lease duration ({self.lease_duration}s) must be greater "
                f"than the renew deadline ({self.renew_deadline}s)"
            )
        if self.stop_timeout is not None and not self.stop_timeout > 0:
            raise ValueError(
                f"leader election: stop timeout ({self.stop_timeout}s) must be > 0"
            )

    @property
    def work_stop_timeout(self) -> float:
        """Seconds the work may take to stop after leadership is lost.

        The default, ``lease_duration - renew_deadline``, is the time between
        the leader giving up (at most ``renew_deadline`` after its last
        successful renewal) and the earliest moment a candidate may acquire
        (``lease_duration`` after it saw that renewal): work that has not stopped
        by then ends with its process before another leader can start.
        """
        if self.stop_timeout is not None:
            return self.stop_timeout
        return self.lease_duration - self.renew_deadline

    @property
    def record_lease_seconds(self) -> int:
        """``leaseDurationSeconds`` written in the record: whole seconds, rounded up.

        Rounding up keeps what candidates wait (this value) longer than our renew
        deadline, which the fence relies on.
        """
        return max(1, math.ceil(self.lease_duration))


@dataclasses.dataclass(frozen=True)
class LeaderRecord:
    """The Lease spec fields that make up client-go's leader record."""

    holder_identity: str
    lease_duration_seconds: int
    acquire_time: str | None
    renew_time: str | None
    lease_transitions: int

    @classmethod
    def from_lease(cls, lease: Mapping[str, Any]) -> LeaderRecord:
        """Read the record from a Lease object."""
        spec = lease.get("spec") or {}
        return cls(
            holder_identity=str(spec.get("holderIdentity") or ""),
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            lease_transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> dict[str, Any]:
        """The Lease ``spec`` for this record."""
        return {
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.lease_transitions,
        }

    def duration(self, fallback: float) -> float:
        """How long a candidate must see this record unchanged before taking over.

        The holder's own ``leaseDurationSeconds``; ``fallback`` (the candidate's
        setting) only when the record carries none.
        """
        return float(self.lease_duration_seconds) if self.lease_duration_seconds > 0 \
            else fallback


def _resource_version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _within(elapsed: float, limit: float, fine: str, stalled: str,
            cause: str = "") -> tuple[bool, str]:
    """A liveness verdict: ``fine`` while ``elapsed <= limit``, else ``stalled`` and the limit."""
    if elapsed > limit:
        return False, f"{stalled} (limit {limit:g}s){cause}"
    return True, fine


class LeaderElector:
    """Campaigns for one Lease and runs the leader's work while it holds it."""

    def __init__(
        self,
        api: kube.ApiClient,
        config: ElectionConfig,
        *,
        clock: clocks.Clock | None = None,
        on_change: Callable[[bool], None] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.api = api
        self.config = config
        self.clock = clock or clocks.Clock()
        self._on_change = on_change
        self._rng = rng or random.Random()
        self._lease: dict[str, Any] | None = None
        self._observed: LeaderRecord | None = None
        self._observed_at = float("-inf")
        self._last_renew_sent = float("-inf")
        self._leading = False
        self._revoked = False
        self._campaigning = False
        self._stuck = False
        self._last_progress = float("-inf")
        self._watch_failures = 0
        self._watch_retry_at = float("-inf")
        # The elector's own Lease writes are fenced too: a renewal may not be sent
        # once the renew deadline has passed, nor a release.
        self._lease_api = api.guarded(self._renewal_guard)
        self._release_api = api.guarded(self._release_guard)

    @property
    def is_leader(self) -> bool:
        """Whether this process currently believes it leads."""
        return self._leading

    @property
    def observed_leader(self) -> str:
        """The holder named in the last record seen (may be empty)."""
        return self._observed.holder_identity if self._observed else ""

    def _set_leading(self, leading: bool) -> None:
        if leading != self._leading:
            self._leading = leading
            log.info(
                "%s %s leadership of lease %s/%s", self.config.identity,
                "acquired" if leading else "stopped", self.config.lease_namespace,
                self.config.lease_name,
            )
            if self._on_change is not None:
                self._on_change(leading)

    # --- the fence -----------------------------------------------------

    def _renewal_age(self) -> float:
        return self.clock.monotonic() - self._last_renew_sent

    def check_fence(self) -> None:
        """Raise :class:`~clusterhealth_core.kube.errors.NotLeader` unless writes are safe.

        Safe means: this process leads, has not detected the loss of the Lease,
        and sent its last successful renewal less than ``renew_deadline`` ago.
        No candidate may acquire before ``lease_duration`` (longer) has passed
        since it saw that renewal, so a write let through here cannot meet
        another leader's writes, except for the time between this check and the
        request leaving the process (see ``docs/leader-election.md``).  Give it
        to ``ApiClient.guarded`` so that it runs immediately before every write.
        """
        cfg = self.config
        if not self._leading or self._revoked:
            raise errors.NotLeader(
                f"{cfg.identity} does not lead lease {cfg.lease_namespace}/{cfg.lease_name}: "
                "write refused"
            )
        age = self._renewal_age()
        if age >= cfg.renew_deadline:
            raise errors.NotLeader(
                f"{cfg.identity}'s last successful renewal of lease {cfg.lease_namespace}/"
                f"{cfg.lease_name} was sent {age:.1f}s ago (renew deadline "
                f"{cfg.renew_deadline:g}s): write refused"
            )

    def _renewal_guard(self) -> None:
        # Candidates write the Lease freely (the resourceVersion guards them); a
        # leader renews only within its renew deadline.
        if self._leading:
            self.check_fence()

    def _release_guard(self) -> None:
        age = self._renewal_age()
        if age >= self.config.renew_deadline:
            raise errors.NotLeader(
                f"last renewal sent {age:.1f}s ago: the lease may be someone else's; "
                "release refused"
            )

    # --- liveness --------------------------------------------------------

    def healthy(self) -> tuple[bool, str]:
        """A liveness check (``serving.HealthServer.add_liveness``): fails when renewals stall.

        Fails while this process believes it leads although its last successful
        renewal is older than the renew deadline plus the stop timeout plus one
        retry period (by then the renewer should have given up and the work
        stopped, or the process exited); while a standby's campaign has made no
        progress (no attempt, no watch event) for longer than the lease
        duration plus the renew deadline plus one retry period; and once the
        work did not stop.
        """
        cfg = self.config
        if self._stuck:
            return False, "the leader's work did not stop after leadership was lost"
        now = self.clock.monotonic()
        if self._leading:
            age = now - self._last_renew_sent
            return _within(age, cfg.renew_deadline + cfg.work_stop_timeout + cfg.retry_period,
                           f"leading, renewed {age:.1f}s ago",
                           f"leading, but the last successful renewal was sent {age:.1f}s ago",
                           ": renewals stalled")
        if self._campaigning:
            idle = now - self._last_progress
            return _within(idle, cfg.lease_duration + cfg.renew_deadline + cfg.retry_period,
                           f"standing by (leader: {self.observed_leader or 'none'})",
                           f"standing by, but the campaign made no progress for {idle:.1f}s")
        return True, "not campaigning"

    def _progress(self) -> None:
        self._last_progress = self.clock.monotonic()

    # --- the record ------------------------------------------------------

    def _now_micro(self) -> str:
        return clocks.format_rfc3339(self.clock.now(), micro=True)

    def _expires_at(self) -> float:
        """When the observed record may be taken over (our monotonic clock)."""
        if self._observed is None:
            return float("-inf")
        return self._observed_at + self._observed.duration(self.config.lease_duration)

    def _held_by_other(self) -> bool:
        """Whether the last record seen names another holder whose lease is still valid."""
        record = self._observed
        return (record is not None
                and record.holder_identity not in ("", self.config.identity)
                and self._expires_at() > self.clock.monotonic())

    async def try_acquire_or_renew(self) -> bool:
        """One attempt to become or stay the holder; True when this process holds it."""
        cfg = self.config
        now_text = self._now_micro()
        sent_at = self.clock.monotonic()
        mine = LeaderRecord(
            holder_identity=cfg.identity,
            lease_duration_seconds=cfg.record_lease_seconds,
            acquire_time=now_text,
            renew_time=now_text,
            lease_transitions=0,
        )
        try:
            lease = await self.api.get(
                resources.LEASES, cfg.lease_name, namespace=cfg.lease_namespace
            )
        except errors.NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": cfg.lease_name, "namespace": cfg.lease_namespace},
                "spec": mine.to_spec(),
            }
            return await self._write(self._lease_api.create(resources.LEASES, body), mine, sent_at)
        old = LeaderRecord.from_lease(lease)
        if old != self._observed:
            self._observe(old, self.clock.monotonic())
        self._lease = lease
        if self._held_by_other():
            return False
        if old.holder_identity == cfg.identity:
            record = dataclasses.replace(
                mine, acquire_time=old.acquire_time, lease_transitions=old.lease_transitions
            )
        else:
            record = dataclasses.replace(mine, lease_transitions=old.lease_transitions + 1)
        updated = dict(lease)
        updated["spec"] = record.to_spec()
        return await self._write(self._lease_api.update(resources.LEASES, updated), record, sent_at)

    async def _write(
        self, write: Coroutine[Any, Any, kube.Object], record: LeaderRecord, sent_at: float
    ) -> bool:
        """Send a create or update of the lease; True when it won (no Conflict)."""
        try:
            self._lease = await write
        except errors.Conflict:
            return False
        self._observe(record, sent_at)
        self._last_renew_sent = sent_at
        return True

    def _observe(self, record: LeaderRecord, at: float) -> None:
        self._observed = record
        self._observed_at = at

    async def release(self) -> bool:
        """Give the lease up (empty holder) if this process holds it.

        Not sent when the last renewal is older than the renew deadline: the
        lease may have passed to another process by then.
        """
        lease = self._lease
        if lease is None or LeaderRecord.from_lease(lease).holder_identity != self.config.identity:
            return False
        old = LeaderRecord.from_lease(lease)
        now_text = self._now_micro()
        released = LeaderRecord(
            holder_identity="",
            lease_duration_seconds=1,
            acquire_time=now_text,
            renew_time=now_text,
            lease_transitions=old.lease_transitions,
        )
        body = dict(lease)
        body["spec"] = released.to_spec()
        try:
            self._lease = await self._release_api.update(resources.LEASES, body)
        except (errors.KubeError, OSError) as exc:
            log.warning("could not release lease %s: %s", self.config.lease_name, exc)
            return False
        self._observe(released, self.clock.monotonic())
        return True

    # --- campaign ------------------------------------------------------

    def _retry_pause(self) -> float:
        # Jitter only downwards, so a released lease is taken within one period.
        return self.config.retry_period * self._rng.uniform(0.8, 1.0)

    async def _attempt(self, deadline: float | None = None) -> bool:
        now = self.clock.monotonic()
        limit = self.config.renew_deadline if deadline is None else deadline - now
        if limit <= 0:
            return False
        try:
            async with asyncio.timeout(limit):
                return await self.try_acquire_or_renew()
        except (errors.KubeError, TimeoutError, OSError) as exc:
            log.debug("lease attempt by %s failed: %s", self.config.identity, exc)
            return False

    async def acquire(self) -> None:
        """Return once this process holds the lease."""
        self._campaigning = True
        try:
            while True:
                self._progress()
                if await self._attempt():
                    break
                await self._stand_by()
        finally:
            self._campaigning = False
        self._revoked = False
        self._set_leading(True)

    async def _stand_by(self) -> None:
        """Wait until the next attempt is due.

        While another process validly holds the Lease, follow it with a watch
        (no request in steady state); otherwise, or while watching fails, wait
        one retry period as client-go does.
        """
        if not self._held_by_other() or self.clock.monotonic() < self._watch_retry_at:
            await self.clock.sleep(self._retry_pause())
            return
        try:
            await self._watch_until_due()
        except errors.Gone:
            return  # our resourceVersion is too old: read the Lease afresh
        except (errors.KubeError, OSError, ValueError) as exc:
            self._watch_failed(exc)
            await self.clock.sleep(self._retry_pause())
        else:
            self._watch_failures = 0

    def _watch_failed(self, exc: Exception) -> None:
        self._watch_failures += 1
        pause = min(self.config.lease_duration * 2 ** min(self._watch_failures - 1, 10),
                    _WATCH_BACKOFF_MAX)
        self._watch_retry_at = self.clock.monotonic() + pause
        log.log(
            logging.WARNING if self._watch_failures == 1 else logging.DEBUG,
            "watching lease %s/%s failed (%s); reading it every retry period for %.0fs",
            self.config.lease_namespace, self.config.lease_name, exc, pause,
        )

    async def _watch_until_due(self) -> None:
        """Follow the Lease until an attempt is due, then return.

        Due means: the record was released, deleted or changed hands, or it may
        have expired (its own lease duration has passed since it last changed),
        or nothing at all arrived for our lease duration (the watch may be
        dead; the attempt reads the Lease).  Watches the server ends are
        resumed from the last ``resourceVersion`` without reading the Lease.
        """
        cfg = self.config
        lease = self._lease
        if lease is None:
            return
        resource_version = _resource_version(lease)
        loop = asyncio.get_running_loop()

        def due() -> float:  # in the event loop's time, for asyncio.timeout_at
            at = min(self._expires_at(), self._last_progress + cfg.lease_duration)
            return loop.time() + (at - self.clock.monotonic())

        scope = asyncio.timeout_at(due())
        try:
            async with scope:
                while True:
                    stream = self.api.watch(
                        resources.LEASES, namespace=cfg.lease_namespace,
                        field_selector=f"metadata.name={cfg.lease_name}",
                        resource_version=resource_version,
                        timeout_seconds=round(self._rng.uniform(*_WATCH_SECONDS)),
                    )
                    try:
                        async for event in stream:
                            self._progress()
                            resource_version = _resource_version(event.object) \
                                or resource_version
                            if event.type == "BOOKMARK":
                                continue
                            if event.type == "DELETED":
                                self._lease = None
                                return
                            self._lease = event.object
                            record = LeaderRecord.from_lease(event.object)
                            if record != self._observed:
                                self._observe(record, self.clock.monotonic())
                            if not self._held_by_other():
                                return
                            scope.reschedule(due())
                    finally:
                        if isinstance(stream, AsyncGenerator):
                            await stream.aclose()  # close the watch connection now
        except TimeoutError:
            if scope.expired():
                return
            raise

    async def _renew_until_lost(self) -> None:
        """Renew every retry period; return when renewals failed for the renew deadline."""
        while True:
            await self.clock.sleep(self.config.retry_period)
            while True:
                deadline = self._last_renew_sent + self.config.renew_deadline
                if self.clock.monotonic() >= deadline:
                    return
                if await self._attempt(deadline):
                    break
                if self._observed and self._observed.holder_identity not in (
                    "", self.config.identity,
                ):
                    return  # someone else holds it now
                pause = min(self._retry_pause(), deadline - self.clock.monotonic())
                await self.clock.sleep(pause)

    async def run(self, lead: LeadFunction) -> None:
        """Campaign, run ``lead()`` while leading; on loss, cancel it and campaign again.

        Returns when ``lead()`` returns by itself (after releasing the lease).
        Cancelling ``run`` stops the work, releases the lease and re-raises.
        Raises :class:`WorkDidNotStop` when the work, once cancelled, has not
        stopped within the stop timeout (the lease is then not released).
        """
        while True:
            await self.acquire()
            work = asyncio.create_task(lead(), name=f"leader-work:{self.config.lease_name}")
            renewer = asyncio.create_task(self._renew_until_lost(), name="lease-renewer")
            try:
                done, _ = await asyncio.wait(
                    {work, renewer}, return_when=asyncio.FIRST_COMPLETED
                )
            except asyncio.CancelledError:
                # Keep renewing while the work winds down, so its last writes pass the fence.
                stopped = await self._stop_work(work)
                await _stop(renewer)
                self._set_leading(False)
                if not stopped:
                    raise self._did_not_stop("shutting down") from None
                if self.config.release_on_cancel:
                    with contextlib.suppress(Exception):
                        await asyncio.shield(self._attempt_release())
                raise
            if work in done:
                await _stop(renewer)
                self._set_leading(False)
                await self._attempt_release()
                work.result()  # re-raise the work's own failure
                return
            # Renewal lost: no more writes; stop the work before anyone else may acquire.
            self._revoked = True
            stopped = await self._stop_work(work)
            self._set_leading(False)
            if not stopped:
                raise self._did_not_stop("leadership lost")
            log.warning("%s lost lease %s; campaigning again", self.config.identity,
                        self.config.lease_name)

    async def _stop_work(self, work: asyncio.Task[None]) -> bool:
        """Cancel the work; wait for it at most the stop timeout; whether it stopped."""
        work.cancel()
        done, _ = await asyncio.wait({work}, timeout=self.config.work_stop_timeout)
        if not done:
            return False
        if not work.cancelled() and (failure := work.exception()) is not None:
            log.warning("the leader's work failed while stopping: %r", failure)
        return True

    def _did_not_stop(self, why: str) -> WorkDidNotStop:
        self._stuck = True
        cfg = self.config
        return WorkDidNotStop(
            f"{why}: the leader's work for lease {cfg.lease_namespace}/{cfg.lease_name} did "
            f"not stop within {cfg.work_stop_timeout:g}s of being cancelled"
        )

    async def _attempt_release(self) -> None:
        try:
            async with asyncio.timeout(self.config.retry_period):
                await self.release()
        except TimeoutError:
            log.warning("lease release timed out")


async def _stop(*tasks: asyncio.Task[Any]) -> None:
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
