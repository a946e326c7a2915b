"""The MultiClusterIngress controller: status, finalizer, and the load balancer.

Keyed by MCI (``namespace/name``).  An MCI is reconciled when it changes,
when a Cluster's ``remedyActions`` or membership change, when a referenced
Service or its EndpointSlices change in any member, and on every resync.
A reconcile computes a :class:`~clusterhealth_mci.plan.Plan` from the caches,
asks the provider to converge, and server-side-applies the status fields it
owns (``serviceLocations``, ``trafficBlockClusters``, ``loadBalancer`` and its
conditions).  A finalizer makes sure deleting an MCI removes its load-balancer
configuration first.  Only MCIs of our ingress class are served.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from clusterhealth_core import clock as clocks
from clusterhealth_core import events, status, workqueue
from clusterhealth_core.api import mci, meta
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, informer, resources
from clusterhealth_mci import bindings, members, metrics, plan
from clusterhealth_mci.providers import base

log = logging.getLogger(__name__)

FIELD_MANAGER = "clusterhealth-mci-provider"
FINALIZER = "networking.karmada.io/clusterhealth-load-balancer"
CONDITION_FAIL_OPEN = "FailOpen"
CONDITION_LB_READY = "LoadBalancerReady"


@dataclasses.dataclass(frozen=True)
class ControllerSettings:
    """How the controller works."""

    ingress_class: str = "clusterhealth"
    default_class: bool = True
    fail_open: bool = True
    workers: int = 2
    resync_period: float = 300.0


class MCIController:
    """Caches, queue and reconcile of MultiClusterIngresses."""

    def __init__(self, api: kube.ApiClient, provider: base.Provider,
                 settings: ControllerSettings, mci_metrics: metrics.MCIMetrics,
                 clock: clocks.Clock) -> None:
        self.api = api
        self.provider = provider
        self.settings = settings
        self.metrics = mci_metrics
        self.clock = clock
        self.recorder = events.EventRecorder(api, "clusterhealth-mci-provider", clock)
        self.mcis = informer.Informer(api, resources.MULTI_CLUSTER_INGRESSES)
        self.clusters = informer.Informer(api, resources.CLUSTERS)
        self.members = members.Members(api, self._member_changed)
        self.bindings = bindings.Bindings(api, self._service_changed)
        self.queue = workqueue.WorkQueue()
        self.specs: dict[str, base.LoadBalancerSpec] = {}
        self.fail_open: dict[str, bool] = {}
        self._members_dirty = asyncio.Event()
        self.mcis.add_handler(self._on_mci)
        self.clusters.add_handler(self._on_cluster)

    @property
    def synced(self) -> bool:
        """Whether the MCI and Cluster caches have loaded."""
        return self.mcis.synced and self.clusters.synced

    # --- handlers -------------------------------------------------------

    def _on_mci(self, event: str, obj: dict[str, Any], old: object) -> None:
        self.queue.add(informer.key_of(obj))

    def _on_cluster(self, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event != "MODIFIED" or members.access_of(obj) != members.access_of(old or {}):
            self._members_dirty.set()
        before = ((old or {}).get("status") or {}).get("remedyActions")
        after = (obj.get("status") or {}).get("remedyActions")
        if event != "MODIFIED" or before != after:
            self._queue_all()

    def _service_changed(self, namespace: str, service: str) -> None:
        self._member_changed("", namespace, service)

    def _member_changed(self, cluster: str, namespace: str, service: str) -> None:
        for key, obj in self.mcis.store.items():
            if not namespace or (obj["metadata"].get("namespace") == namespace
                                 and service in _services(obj)):
                self.queue.add(key)

    def _queue_all(self) -> None:
        for key in self.mcis.store:
            self.queue.add(key)

    # --- reconcile ----------------------------------------------------------

    def ours(self, obj: Mapping[str, Any]) -> bool:
        """Whether the MCI names our ingress class (or none, when we are the default)."""
        name = (obj.get("spec") or {}).get("ingressClassName")
        return name == self.settings.ingress_class or (name is None
                                                       and self.settings.default_class)

    async def _timed(self, operation: str, call: Any) -> Any:
        started = self.clock.monotonic()
        try:
            return await call
        except (base.ProviderError, OSError):
            self.metrics.provider_errors.labels(self.provider.name, operation).inc()
            raise
        finally:
            self.metrics.provider_call_duration.labels(self.provider.name, operation).observe(
                self.clock.monotonic() - started)

    async def _delete(self, key: str, obj: Mapping[str, Any] | None) -> None:
        await self._timed("ensure_deleted", self.provider.ensure_load_balancer_deleted(key))
        self.specs.pop(key, None)
        self.fail_open.pop(key, None)
        self.metrics.forget(key)
        if obj is not None and FINALIZER in (obj["metadata"].get("finalizers") or []):
            finalizers = [f for f in obj["metadata"]["finalizers"] if f != FINALIZER]
            await self.api.patch(
                resources.MULTI_CLUSTER_INGRESSES, obj["metadata"]["name"],
                [{"op": "test", "path": "/metadata/resourceVersion",
                  "value": obj["metadata"]["resourceVersion"]},
                 {"op": "replace", "path": "/metadata/finalizers", "value": finalizers}],
                namespace=obj["metadata"]["namespace"], patch_type="json")

    async def _add_finalizer(self, obj: Mapping[str, Any]) -> None:
        finalizers = [*(obj["metadata"].get("finalizers") or []), FINALIZER]
        await self.api.patch(
            resources.MULTI_CLUSTER_INGRESSES, obj["metadata"]["name"],
            [{"op": "test", "path": "/metadata/resourceVersion",
              "value": obj["metadata"]["resourceVersion"]},
             {"op": "add", "path": "/metadata/finalizers", "value": finalizers}],
            namespace=obj["metadata"]["namespace"], patch_type="json")

    def make_plan(self, obj: Mapping[str, Any]) -> plan.Plan:
        """The plan for one MCI from the current caches."""
        namespace = str(obj["metadata"]["namespace"])
        model = mci.MultiClusterIngress.from_dict(obj)
        _, service_keys, _ = plan.routes(model.spec)
        located = {}
        for name, _ in service_keys:
            bound = self.bindings.located(namespace, name)  # Karmada's way, when bound
            located[name] = bound if bound is not None else self.members.located(namespace, name)
        endpoints = {
            (cluster, name, port): self.members.endpoints(cluster, namespace, name, port)
            for name, port in service_keys for cluster in located[name]
        }
        actions = {
            str(c["metadata"]["name"]): tuple((c.get("status") or {}).get("remedyActions") or [])
            for c in self.clusters.store.values()
        }
        annotations = obj["metadata"].get("annotations") or {}
        try:
            weights = plan.parse_weights(annotations.get(plan.WEIGHTS_ANNOTATION))
            problem = ""
        except ValueError as exc:
            weights, problem = {}, f"{exc}; using equal weights"
        decided = plan.make_plan(informer.key_of(dict(obj)), model.spec, located, endpoints,
                                 actions, fail_open=self.settings.fail_open, weights=weights)
        return dataclasses.replace(decided, problems=(problem,) if problem else ())

    async def reconcile(self, key: str) -> None:
        """Converge the load balancer and the status of one MCI."""
        obj = self.mcis.store.get(key)
        if obj is None:
            await self._delete(key, None)
            return
        if obj["metadata"].get("deletionTimestamp") or not self.ours(obj):
            if FINALIZER in (obj["metadata"].get("finalizers") or []) or key in self.specs:
                await self._delete(key, obj)
            return
        if FINALIZER not in (obj["metadata"].get("finalizers") or []):
            await self._add_finalizer(obj)
            return  # the update event brings us back with the finalizer in place
        decided = self.make_plan(obj)
        lb_status = await self._timed("ensure", self.provider.ensure_load_balancer(decided.spec))
        self.specs[key] = decided.spec
        await self._write_status(obj, decided, lb_status)
        self._record_metrics(key, decided, lb_status)
        if decided.fail_open != self.fail_open.get(key, False):
            target = {"apiVersion": resources.MULTI_CLUSTER_INGRESSES.api_version,
                      "kind": "MultiClusterIngress", **obj}
            if decided.fail_open:
                self.recorder.record(target, "Warning", "FailOpen", _fail_open_message(decided))
            else:
                self.recorder.record(target, "Normal", "FailOpenEnded",
                                     "blocked clusters no longer cover every location")
        self.fail_open[key] = decided.fail_open

    async def _write_status(self, obj: Mapping[str, Any], decided: plan.Plan,
                            lb_status: base.LoadBalancerStatus) -> None:
        now = self.clock.now().replace(microsecond=0)
        conditions = [
            meta.Condition(
                type=CONDITION_FAIL_OPEN,
                status=meta.ConditionStatus.TRUE if decided.fail_open
                else meta.ConditionStatus.FALSE,
                last_transition_time=now,
                reason="AllLocationsBlocked" if decided.fail_open else "NotNeeded",
                message=_fail_open_message(decided) if decided.fail_open
                else "traffic goes only to unblocked clusters",
            ),
            meta.Condition(
                type=CONDITION_LB_READY,
                status=meta.ConditionStatus.TRUE if lb_status.ingress
                else meta.ConditionStatus.FALSE,
                last_transition_time=now,
                reason="Programmed" if lb_status.ingress else "NoAddress",
                message=(f"{self.provider.name}: " + ", ".join(
                    f"{b}: {len(c)} cluster(s) active" for b, c in sorted(
                        lb_status.active.items())) or "no backends")
                + (f"; unsupported non-Service backends at {', '.join(decided.unsupported)}"
                   if decided.unsupported else "")
                + "".join(f"; {problem}" for problem in decided.problems),
            ),
        ]
        conditions = status.keep_transition_times(status.live_conditions(obj), conditions)
        desired: dict[str, Any] = {**decided.status_fields(),
                                   "conditions": [c.to_dict() for c in conditions]}
        ingress = _ingress(lb_status)
        if ingress:
            desired["loadBalancer"] = {"ingress": ingress}
        current = {k: v for k, v in (obj.get("status") or {}).items()
                   if k in ("serviceLocations", "trafficBlockClusters", "loadBalancer",
                            "conditions")}
        if current != desired:
            await status.apply_status(self.api, resources.MULTI_CLUSTER_INGRESSES,
                                      str(obj["metadata"]["name"]), desired,
                                      field_manager=FIELD_MANAGER,
                                      namespace=str(obj["metadata"]["namespace"]))

    def _record_metrics(self, key: str, decided: plan.Plan,
                        lb_status: base.LoadBalancerStatus) -> None:
        self.metrics.blocked_clusters.labels(key).set(len(decided.traffic_block_clusters))
        self.metrics.fail_open.labels(key).set(1 if decided.fail_open else 0)
        counts: dict[str, int] = {}
        for backend_key, clusters in lb_status.active.items():
            backend = decided.spec.backends.get(backend_key)
            for endpoint in backend.endpoints if backend else ():
                if endpoint.cluster in clusters:
                    counts[endpoint.cluster] = counts.get(endpoint.cluster, 0) + 1
        located = {c for _, cs in decided.service_locations for c in cs}
        for cluster in located:
            self.metrics.backends.labels(key, cluster).set(counts.get(cluster, 0))

    # --- loops ----------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                await self.reconcile(key)
                self.queue.forget(key)
            except errors.Conflict:
                self.queue.add(key)  # a newer version arrived: re-read and retry
            except errors.NotFound:
                self.queue.forget(key)
            except (errors.KubeError, base.ProviderError, OSError, meta.ValidationError) as exc:
                delay = self.queue.add_rate_limited(key)
                log.warning("reconcile of %s failed (%s); retry in %.2fs", key, exc, delay)
            finally:
                self.queue.done(key)

    async def _sync_members(self) -> None:
        while True:
            await self._members_dirty.wait()
            self._members_dirty.clear()
            await self.members.sync({str(c["metadata"]["name"]): c
                                     for c in self.clusters.store.values()})
            self._queue_all()

    async def _resync(self) -> None:
        while True:
            await self.clock.sleep(self.settings.resync_period)
            try:
                await self._timed("resync", self.provider.resync(list(self.specs.values())))
            except (base.ProviderError, OSError) as exc:
                log.warning("provider resync failed: %s", exc)
            self._members_dirty.set()
            self._queue_all()

    async def _initial_resync(self) -> None:
        """Make the load balancer match exactly the MCIs we serve (removes leftovers)."""
        specs = []
        for obj in self.mcis.store.values():
            if obj["metadata"].get("deletionTimestamp") or not self.ours(obj):
                continue
            try:
                specs.append(self.make_plan(obj).spec)
            except meta.ValidationError as exc:
                log.warning("skipping %s at start: %s", informer.key_of(obj), exc)
        try:
            await self._timed("resync", self.provider.resync(specs))
            self.specs = {spec.key: spec for spec in specs}
        except (base.ProviderError, OSError) as exc:
            log.warning("initial provider resync failed (%s); reconciles will converge", exc)

    async def run(self) -> None:
        """Run until cancelled."""
        tasks = [asyncio.create_task(self.clusters.run(), name="cluster-informer"),
                 asyncio.create_task(self.mcis.run(), name="mci-informer"),
                 asyncio.create_task(self.recorder.run(), name="events")]
        try:
            if await self.bindings.detect():
                tasks.append(asyncio.create_task(self.bindings.cache.run(), name="bindings"))
                await self.bindings.cache.wait_synced()
            await self.clusters.wait_synced()
            await self.mcis.wait_synced()
            await self.members.sync({str(c["metadata"]["name"]): c
                                     for c in self.clusters.store.values()})
            await asyncio.sleep(0)  # let member informers start
            for member in self.members.members.values():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(10):
                        await member.services.wait_synced()
                        await member.slices.wait_synced()
            await self._initial_resync()
            self._queue_all()
            tasks += [asyncio.create_task(self._worker()) for _ in range(self.settings.workers)]
            tasks += [asyncio.create_task(self._sync_members()),
                      asyncio.create_task(self._resync())]
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await self.members.close()
            self.queue.shutdown()


def _services(obj: Mapping[str, Any]) -> set[str]:
    spec = obj.get("spec") or {}
    names = set()
    default = (spec.get("defaultBackend") or {}).get("service") or {}
    if default.get("name"):
        names.add(str(default["name"]))
    for rule in spec.get("rules") or []:
        for path in ((rule.get("http") or {}).get("paths") or []):
            service = (path.get("backend") or {}).get("service") or {}
            if service.get("name"):
                names.add(str(service["name"]))
    return names


def _ingress(lb_status: base.LoadBalancerStatus) -> list[dict[str, Any]]:
    by_ip: dict[str, list[int]] = {}
    for ip, port in lb_status.ingress:
        by_ip.setdefault(ip, []).append(port)
    return [{"ip": ip, "ports": [{"port": p, "protocol": "TCP"} for p in sorted(ports)]}
            for ip, ports in sorted(by_ip.items())]


def _fail_open_message(decided: plan.Plan) -> str:
    return (f"every located cluster is blocked ({', '.join(decided.traffic_block_clusters)}): "
            "serving from all of them rather than from none")
