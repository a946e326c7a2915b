"""The cluster-status controller's API side: probes, member caches and the status write.

* A key is one Cluster.  Its reconcile comes back every
  ``--cluster-status-update-frequency``, or when a flip of Ready waiting for
  its threshold falls due (:func:`.decision.recheck_after`); a Cluster added or whose spec
  changed is reconciled at once; a deleted one has its caches, memory and
  metric series dropped.
* Push clusters: ``GET /readyz`` (404: ``/healthz``) with the Cluster's
  credentials through the shared member-client pool, one attempt bounded by
  ``--cluster-probe-timeout``; the result goes through
  :func:`.decision.adjust` (thresholds) or, without any result,
  :func:`.decision.unknown` (grace period).  While Ready: ``/version``,
  aggregated discovery (two conditional requests, parsed only when the member's
  documents changed: :mod:`.discovery`; the legacy per-group documents on
  servers without it), and the node and resource summaries from this
  controller's own watches (:mod:`.caches`) on the member's Nodes and unfinished Pods, each
  cut down by a transform to what the summaries need (a Pod is its node, its
  phase and its effective request), so nothing is listed again every 10 s.
  One of these reads that the member does not answer (no connection, no answer
  within the timeout) ends them and counts as a failed probe at once
  (:class:`.discovery.Lost`): a member cut off in the middle of its reads
  would otherwise first wait out each read's timeout and one more period, and
  members cut off together would turn unready further apart than the storm
  guard's window.
* Pull clusters: only the heartbeat is watched (see :mod:`.decision`); the
  Unknown is written by a second field manager, ``clusterhealth-cluster-monitor``.
* Writes: server-side apply of the status subresource as
  ``clusterhealth-cluster-status``, only of its own fields
  (:data:`.decision.OWN_FIELDS`, conditions ``Ready`` and
  ``CompleteAPIEnablements``), only when one of them changed; others'
  conditions and ``remedyActions`` are never in the body.  An Event on the
  Cluster when Ready changes; the ``cluster_ready``, ``cluster_probes`` and
  ``cluster_probe_duration`` metrics.
* A member whose client the pool replaced (rotated credentials) is probed at
  once, so its watches move to the new client and the old one is closed.
* A member whose Node or Pod watch fails unanswered (connection refused or
  reset, no answer in time) is probed at once: a member whose API server
  died is then seen failing within moments, not up to one
  ``--cluster-status-update-frequency`` later (the failure threshold still
  runs from that probe).  A member cut off without its connections failing
  is seen at its next probe, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from clusterhealth_controlplane import manager, options
from clusterhealth_controlplane.clusterstatus import caches, decision, discovery
from clusterhealth_core import builder, members, reconcile
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, informer, resources

log = logging.getLogger(__name__)

CONTROLLER = "clusterStatus"
FIELD_MANAGER = "clusterhealth-cluster-status"
MONITOR_FIELD_MANAGER = "clusterhealth-cluster-monitor"
"""Writes Ready Unknown on Pull clusters whose agent stopped its heartbeat."""
LEASE_NAMESPACE = "karmada-cluster"
"""Where Karmada's agents renew one Lease per Pull cluster (Karmada's namespace)."""
PROBE_WORKERS = 16
"""Concurrent reconciles at least: a probe mostly waits on the network."""
LEASE_FIELDS = informer.keep_fields("spec.renewTime")
READY_STATUSES = (decision.TRUE, decision.FALSE, decision.UNKNOWN)


class ClusterStatusController(manager.Controller):
    """Probes every member and writes its Ready condition and summaries."""

    def __init__(self, context: manager.Context) -> None:
        super().__init__(context)
        self.health: options.ClusterHealth = context.options.health
        self.pool: members.MemberClients = context.members
        self.leases = self.term.informers.informer(resources.LEASES, namespace=LEASE_NAMESPACE,
                                              transform=LEASE_FIELDS)
        self.memory: dict[str, decision.Memory] = {}
        self.caches = caches.MemberCaches(self.term.clock, self.health.probe_timeout,
                                          on_failure=self._watch_failed)
        self.discovery = discovery.Discovery(self.health.probe_timeout)
        self.controller = (
            builder.Builder(CONTROLLER, self.term, workers=max(context.workers, PROBE_WORKERS))
            # a status write (ours or another's) is left to the periodic probe
            .for_(self.clusters, builder.SPEC)
            .uses(self.leases)
            .status(resources.CLUSTERS, FIELD_MANAGER,
                    frozenset({*decision.OWN_FIELDS, "conditions"}),
                    frozenset(decision.OWN_CONDITIONS))
            .status(resources.CLUSTERS, MONITOR_FIELD_MANAGER, frozenset({"conditions"}),
                    frozenset({decision.READY}))
            .on_stop(self.caches.close)
            .complete(self.reconcile_cluster))
        # a replaced client: probe now, so the Node and Pod watches move to the new one and the
        # old one is closed (instead of at the next periodic probe)
        self.pool.add_listener(lambda name: self.controller.enqueue(builder.Request("", name)))

    def _watch_failed(self, name: str, exc: Exception) -> None:
        """A watch on the member went unanswered: probe it now, not a period later."""
        if isinstance(exc, discovery.UNANSWERED):
            self.controller.enqueue(builder.Request("", name))

    # --- reconcile ----------------------------------------------------------

    async def reconcile_cluster(self, request: builder.Request) -> reconcile.Result | None:
        """Probe one member and write what changed."""
        name = request.name
        cluster = self.clusters.store.get(name)
        if cluster is None:
            await self._forget(name)
            return None
        now = self.term.clock.monotonic()
        memory = self.memory.get(name) or decision.Memory(first_seen=now)
        current_status = cluster.get("status") or {}
        current_ready = decision.find(current_status.get("conditions") or [], decision.READY)
        if (cluster.get("spec") or {}).get("syncMode") == "Pull":
            return await self._monitor_pull(cluster, memory, current_ready, now)
        api: kube.ApiClient | None = None
        outcome: decision.Outcome | None = None
        try:
            api = await self.pool.get(cluster)
        except (errors.KubeError, OSError) as exc:
            detail = str(exc)
        else:
            outcome, detail = await self._probe(name, api)
        seen = decision.of_condition(current_ready)
        if outcome is None:
            self.memory[name] = memory
            ready = decision.unknown(memory, seen, now, self.health, detail)
            if ready is None:
                log.info("cluster %s: no probe result (%s); Ready kept until the grace period "
                         "ends", name, detail)
                return reconcile.Result(requeue_after=self.health.update_frequency)
        else:
            observation = decision.observed(outcome, detail)
            memory, ready = decision.adjust(memory, observation, seen, now, self.health)
            self.memory[name] = memory
            if ready != observation and seen is not None:
                log.info("cluster %s: probe says %s (%s); Ready stays %s until the threshold",
                         name, outcome, detail or "-", seen.status)
        refreshed: dict[str, Any] = {}
        if api is not None and outcome is decision.Outcome.OK and ready.status == decision.TRUE:
            try:
                refreshed = await self._collect(cluster, api)
            except discovery.Lost as exc:
                ready = self._lost(name, str(exc), seen)
        wall = self.term.clock.now()
        wanted = decision.desired_status(
            current_status, decision.condition(decision.READY, ready, current_ready, wall),
            refreshed)
        if decision.differs(current_status, wanted):
            await self._write(cluster, wanted)
        self._after(cluster, seen, ready)
        return reconcile.Result(requeue_after=decision.recheck_after(
            self.memory[name], ready, self.term.clock.monotonic(), self.health))

    def _lost(self, name: str, detail: str, seen: decision.Observation | None
              ) -> decision.Observation:
        """The member stopped answering after its probe: a failed probe, counted now.

        Members cut off together then each count their first failure within one
        probe period of the cut (the storm guard's window relies on it), not one
        period plus the reads still waiting for their timeouts.
        """
        outcome = decision.Outcome.UNREACHABLE
        self.metrics.cluster_probes.labels(name, str(outcome)).inc()
        log.info("cluster %s: no answer after its probe (%s); counted as a failed probe",
                 name, detail)
        memory, ready = decision.adjust(self.memory[name], decision.observed(outcome, detail),
                                        seen, self.term.clock.monotonic(), self.health)
        self.memory[name] = memory
        return ready

    async def _probe(self, name: str, api: kube.ApiClient) -> tuple[decision.Outcome, str]:
        started = self.term.clock.monotonic()
        try:
            async with asyncio.timeout(self.health.probe_timeout):
                outcome, detail = await self._health_endpoint(api)
        except TimeoutError:
            outcome = decision.Outcome.UNREACHABLE
            detail = f"no answer within {self.health.probe_timeout:g}s"
        self.metrics.cluster_probe_duration.labels(name).observe(
            self.term.clock.monotonic() - started)
        self.metrics.cluster_probes.labels(name, str(outcome)).inc()
        return outcome, detail

    async def _health_endpoint(self, api: kube.ApiClient) -> tuple[decision.Outcome, str]:
        for path in ("/readyz", "/healthz"):
            try:
                await api.request("GET", path, backoff=discovery.ONE_ATTEMPT,
                                  timeout=self.health.probe_timeout, probe=True)
            except errors.NotFound:
                if path == "/readyz":
                    continue  # an API server without /readyz: Karmada falls back too
                return decision.Outcome.NOT_OK, f"{path} answered 404"
            except errors.ApiError as exc:
                return decision.Outcome.NOT_OK, f"{path} answered {exc.status}"
            except (errors.KubeError, OSError) as exc:
                return decision.Outcome.UNREACHABLE, str(exc)
            return decision.Outcome.OK, ""
        raise AssertionError("unreachable")  # pragma: no cover

    # --- what a Ready member offers -----------------------------------------

    async def _collect(self, cluster: Mapping[str, Any], api: kube.ApiClient) -> dict[str, Any]:
        """The fields refreshed while Ready; a part that fails keeps its last value.

        Raises :class:`.discovery.Lost` at the first read the member does not answer.
        """
        name = str(cluster["metadata"]["name"])
        found: dict[str, Any] = {}
        try:
            async with asyncio.timeout(self.health.probe_timeout):
                version = await api.request("GET", "/version", backoff=discovery.ONE_ATTEMPT)
            if isinstance(version, Mapping) and version.get("gitVersion"):
                found["kubernetesVersion"] = str(version["gitVersion"])
        except discovery.UNANSWERED as exc:
            raise discovery.Lost(
                f"/version: {discovery.unanswered(exc, self.health.probe_timeout)}") from exc
        except errors.KubeError as exc:
            log.warning("cluster %s: /version failed: %s", name, exc)
        enablements, partial = await self.discovery.enablements(name, api)
        if enablements:  # nothing read: the last list stays (the condition says Empty)
            found["apiEnablements"] = enablements
        found["conditions"] = [decision.condition(
            decision.COMPLETE_API_ENABLEMENTS, decision.api_condition(enablements, partial),
            decision.find((cluster.get("status") or {}).get("conditions") or [],
                          decision.COMPLETE_API_ENABLEMENTS), self.term.clock.now())]
        member = await self.caches.get(name, api)
        if member is not None:
            nodes = list(member.nodes.store.values())
            pods = list(member.pods.store.values())
            found["nodeSummary"] = decision.node_summary(nodes)
            found["resourceSummary"] = decision.resource_summary(nodes, pods)
        return found

    # --- writes, events, metrics --------------------------------------------

    async def _write(self, cluster: Mapping[str, Any], wanted: Mapping[str, Any]) -> None:
        with contextlib.suppress(errors.NotFound):  # deleted meanwhile
            await self.controller.writer(resources.CLUSTERS, FIELD_MANAGER).write(
                str(cluster["metadata"]["name"]), wanted, cached=cluster)

    def _after(self, cluster: Mapping[str, Any], before: decision.Observation | None,
               ready: decision.Observation) -> None:
        name = str(cluster["metadata"]["name"])
        for value in READY_STATUSES:
            self.metrics.cluster_ready.labels(name, value).set(1 if value == ready.status else 0)
        if before is not None and before.status == ready.status:
            return
        was = before.status if before is not None else "none"
        log.info("cluster %s: Ready %s -> %s (%s: %s)", name, was, ready.status, ready.reason,
                 ready.message)
        self.term.recorder.record(
            {**cluster, "apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster"},
            "Normal" if ready.status == decision.TRUE else "Warning", ready.reason,
            f"Ready changed from {was} to {ready.status}: {ready.message}")

    async def _monitor_pull(self, cluster: Mapping[str, Any], memory: decision.Memory,
                            current_ready: Mapping[str, Any] | None, now: float
                            ) -> reconcile.Result:
        name = str(cluster["metadata"]["name"])
        lease = self.leases.store.get(f"{LEASE_NAMESPACE}/{name}") or {}
        renewed = (lease.get("spec") or {}).get("renewTime")
        seen = decision.of_condition(current_ready)
        memory = decision.heartbeat(memory, str(renewed) if renewed else None, seen, now)
        self.memory[name] = memory
        ready = decision.pull_unknown(memory, seen, now, self.health)
        if ready is not None:
            written = decision.condition(decision.READY, ready, current_ready,
                                         self.term.clock.now())
            with contextlib.suppress(errors.NotFound):
                await self.controller.writer(resources.CLUSTERS, MONITOR_FIELD_MANAGER).write(
                    name, {"conditions": [written]}, cached=cluster)
            self._after(cluster, seen, ready)
        elif seen is not None:
            self._after(cluster, seen, seen)
        return reconcile.Result(requeue_after=decision.pull_recheck(memory, now, self.health))

    async def _forget(self, name: str) -> None:
        self.memory.pop(name, None)
        self.discovery.forget(name)
        await self.caches.stop(name)
        for value in READY_STATUSES:
            with contextlib.suppress(KeyError):
                self.metrics.cluster_ready.remove(name, value)
        with contextlib.suppress(KeyError):
            self.metrics.cluster_probe_duration.remove(name)
        for outcome in decision.Outcome:
            with contextlib.suppress(KeyError):
                self.metrics.cluster_probes.remove(name, str(outcome))
