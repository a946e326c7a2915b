"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's semantics.

Every controller runs several replicas and lets exactly one work.  The rules
(see ``docs/leader-election.md``):

* acquire or renew by an update guarded by ``resourceVersion``;
* a candidate may take over only when the record has not changed for
  ``lease_duration`` as measured on *its own* monotonic clock since it last
  saw a change (no trust in other machines' wall clocks);
* ``leaseTransitions`` is incremented on every change of holder;
* a leader whose renewals have not succeeded for ``renew_deadline`` (counted
  from the moment it sent its last successful renewal) cancels its work and
  waits for it to stop.  Since ``renew_deadline < lease_duration``, the work
  has stopped before any candidate may acquire;
* on graceful shutdown the lease is released (empty holder), so the next
  candidate takes over within one ``retry_period``.

Unlike the Python ``kubernetes`` client's elector, nothing here exits the
process, timestamps are UTC RFC 3339 with microseconds, and a leader that
loses the lease goes back to being a candidate.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import socket
import uuid
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from clusterhealth_core import clock as clocks
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources

log = logging.getLogger(__name__)

LeadFunction = Callable[[], Coroutine[Any, Any, None]]


def default_identity() -> str:
    """``<hostname>_<random>``, unique per process like client-go's examples."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:12]}"


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

    # --- the record ------------------------------------------------------

    def _now_micro(self) -> str:
        return clocks.format_rfc3339(self.clock.now(), micro=True)

    async def try_acquire_or_renew(self) -> bool:
        """One attempt to become or stay the holder; True when this process holds it."""
        cfg = self.config
        now_text = self._now_micro()
        sent_at = self.clock.monotonic()
        mine = LeaderRecord(
            holder_identity=cfg.identity,
            lease_duration_seconds=max(1, round(cfg.lease_duration)),
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
            try:
                self._lease = await self.api.create(resources.LEASES, body)
            except errors.Conflict:
                return False
            self._observe(mine, sent_at)
            self._last_renew_sent = sent_at
            return True
        old = LeaderRecord.from_lease(lease)
        if old != self._observed:
            self._observe(old, self.clock.monotonic())
        self._lease = lease
        held_by_other = old.holder_identity not in ("", cfg.identity)
        if held_by_other and self._observed_at + cfg.lease_duration > self.clock.monotonic():
            return False
        if old.holder_identity == cfg.identity:
            record = dataclasses.replace(
                mine, acquire_time=old.acquire_time, lease_transitions=old.lease_transitions
            )
        else:
            record = dataclasses.replace(mine, lease_transitions=old.lease_transitions + 1)
        updated = dict(lease)
        updated["spec"] = record.to_spec()
        try:
            self._lease = await self.api.update(resources.LEASES, updated)
        except errors.Conflict:
            return False
        self._observe(record, sent_at)
        self._last_renew_sent = sent_at
        return True

    def _observe(self, record: LeaderRecord, at: float) -> None:
        self._observed = record
        self._observed_at = at

    async def release(self) -> bool:
        """Give the lease up (empty holder) if this process holds it."""
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
            self._lease = await self.api.update(resources.LEASES, body)
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
        while not await self._attempt():
            await self.clock.sleep(self._retry_pause())
        self._set_leading(True)

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
                await _stop(work, renewer)
                self._set_leading(False)
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
            # Renewal lost: stop the work before anyone else may acquire.
            await _stop(work)
            self._set_leading(False)
            log.warning("%s lost lease %s; campaigning again", self.config.identity,
                        self.config.lease_name)

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
