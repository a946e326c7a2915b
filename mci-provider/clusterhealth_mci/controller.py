"""The MultiClusterIngress controller: status, finalizer, and the load balancer.

Keyed by MCI (``namespace/name``), declared with the core's builder
(:mod:`clusterhealth_core.builder`, a controller named ``mci``).  An MCI is
reconciled when it changes, when a Cluster's ``remedyActions`` change (the
MCIs located there), when a referenced Service or its EndpointSlices change
in any member, when an MCI it shares a host and path with changes, and on
every resync (the builder's, after the provider's own resync).  A reconcile
computes a :class:`~clusterhealth_mci.plan.Plan` from the caches, asks the
provider to converge, and server-side-applies the status fields it owns
(``serviceLocations``, ``trafficBlockClusters``, ``loadBalancer`` and its
conditions).  A finalizer makes sure deleting an MCI
removes its load-balancer configuration first.  Only MCIs of our ingress
class are served.

Errors the user must fix are not retried: the reconcile raises a
:class:`SpecError` (a :class:`~clusterhealth_core.runtime.TerminalError`)
and :meth:`MCIController.on_terminal` writes ``LoadBalancerReady=False``
with the reason and a Warning Event into the MCI's namespace; the key then
waits until something it depends on changes:

* ``InvalidSpec``: a path or host the load balancer cannot serve;
* ``RouteConflict``: a host and path another MCI already serves.  The older
  MCI (``creationTimestamp``, then ``namespace/name``: the Gateway API's
  rule) keeps it, whichever was programmed first, so the outcome is the
  same after a restart;
* ``CapacityExceeded``: more endpoints than a backend slot holds, or no
  free slot;
* ``PortNotFound``: the backend's Service port exists in none of the
  clusters running the Service.

A backend Service that runs in no member is not terminal (the Service may be
propagated a moment later, and its creation in a member brings the MCI back):
the load balancer is programmed as usual (the MCI's other backends serve), but
``LoadBalancerReady`` is False with reason ``ServiceNotFound`` naming the
Service, and a Warning Event ``ServiceNotFound`` says so once per set of
missing Services.

The load balancer keeps what it served for that MCI before (if anything)
until the controller restarts.  Everything else (API server or HAProxy
unreachable, conflicts on write) is retried with the runtime's backoff.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from clusterhealth_core import builder, events, runner, status
from clusterhealth_core import members as pool_members
from clusterhealth_core import reconcile as runtime
from clusterhealth_core.api import mci as mci_api
from clusterhealth_core.api import meta
from clusterhealth_core.kube import informer, resources
from clusterhealth_mci import bindings, memberservices, metrics, plan, routes
from clusterhealth_mci.providers import base

log = logging.getLogger(__name__)

CONTROLLER = "mci"
COMPONENT = "clusterhealth-mci-provider"
FIELD_MANAGER = COMPONENT
FINALIZER = "networking.karmada.io/clusterhealth-load-balancer"
CONDITION_FAIL_OPEN = "FailOpen"
CONDITION_LB_READY = "LoadBalancerReady"
INVALID_SPEC = "InvalidSpec"
ROUTE_CONFLICT = "RouteConflict"
CAPACITY_EXCEEDED = "CapacityExceeded"
PORT_NOT_FOUND = "PortNotFound"
MEMBER_NOT_WATCHED = pool_members.MEMBER_NOT_WATCHED
"""The Event reason on a Cluster whose member the provider cannot watch (e.g. no
credentials of its own there)."""
SERVICE_NOT_FOUND = "ServiceNotFound"
"""A backend Service runs in no member cluster (not terminal: it may come)."""
OWNED_STATUS = ("serviceLocations", "trafficBlockClusters", "loadBalancer", "conditions")
PORT_STATUS = {"loadBalancer.ingress.ports": frozenset({"port", "protocol"})}
"""The ports of ``status.loadBalancer.ingress[]`` and what is written of each: left out by the
status writer where the server's schema requires more (Karmada's CRD is generated from
Kubernetes' ``IngressPortStatus``, whose ``error`` is marked both optional and ``Required``: a
healthy port cannot be written there, 422)."""
CAPACITY_SETTINGS = {
    "servers_per_slot": "--haproxy-servers-per-slot (chart value haproxy.serversPerSlot)",
    "slots": "--haproxy-slots (chart value haproxy.slots)",
}
"""The flag raising each provider limit; the HAProxy configuration must be rendered for it."""
CONDITION_MESSAGE_BUDGET = 2048
"""Characters of a condition message (the API allows 32768: a long list never costs the
whole status write, and stays readable in ``kubectl describe``)."""
EVENT_MESSAGE_BUDGET = 1000
"""Characters of an Event message (the recorder cuts at 1024 bytes)."""

cluster_fields = informer.keep_fields(
    "spec.apiEndpoint", "spec.secretRef", "spec.insecureSkipTLSVerification", "spec.proxyURL",
    "spec.proxyHeader", "status.remedyActions")
"""What the controller reads of a Cluster: how to reach it, and its remedy actions."""


@dataclasses.dataclass(frozen=True)
class ControllerSettings:
    """How the controller works."""

    ingress_class: str = "clusterhealth"
    default_class: bool = True
    fail_open: bool = True
    workers: int = 2
    resync_period: float = 300.0
    member_credentials: str = pool_members.READONLY
    """Whose credentials read the members (:data:`clusterhealth_core.members.MODES`)."""
    member_secret_namespace: str = "clusterhealth-mci-credentials"
    """Read-only mode: the only namespace whose Secrets are read and watched (one per
    Cluster, named like it: the provider's own read-only credentials)."""
    cluster_secret_namespace: str = "karmada-cluster"
    """Cluster mode: the only namespace whose Secrets (the Clusters' ``secretRef``) are read
    and watched."""
    drain_timeout: float = 30.0
    """The provider's drain timeout: slots freed by a deleted MCI are free after it."""
    member_load_timeout: float = 10.0
    """How long the start waits for the members' caches before the first resync."""


class SpecError(runtime.TerminalError):
    """The MCI cannot be served as it is; the plan (if one was made) goes into the status."""

    def __init__(self, reason: str, message: str, decided: plan.Plan | None = None) -> None:
        super().__init__(reason, message)
        self.plan = decided


class MCIController(builder.Declared):
    """Caches, the ``mci`` controller and the reconcile of MultiClusterIngresses."""

    def __init__(self, term: runner.Term, provider: base.Provider,
                 settings: ControllerSettings, mci_metrics: metrics.MCIMetrics) -> None:
        super().__init__(term)
        self.provider = provider
        self.writes = term.writes
        """False in a standby (``--standby-programs``): the load balancer only, no writes."""
        self.settings = settings
        self.metrics = mci_metrics
        self.mcis = term.informers.informer(resources.MULTI_CLUSTER_INGRESSES)
        self.clusters = term.informers.informer(resources.CLUSTERS, transform=cluster_fields)
        self.members = memberservices.MemberCaches.of_term(
            term, self.clusters, self._member_changed, credentials=settings.member_credentials,
            readonly_namespace=settings.member_secret_namespace,
            cluster_namespace=settings.cluster_secret_namespace)
        self.bindings = bindings.Bindings(term.api, term.informers, self._service_changed)
        self.specs: dict[str, base.LoadBalancerSpec] = {}
        """What the provider serves, by MCI (the last spec it accepted)."""
        self.failed: dict[str, str] = {}
        """MCI -> the reason it is not served (terminal errors only)."""
        self.routes = routes.RouteIndex()
        """Every MCI's analysis, by the routes it claims, the Services it names, where it runs."""
        self.notices = Notices(self.recorder, term.writes)
        self.controller = (
            builder.Builder(CONTROLLER, term, workers=settings.workers)
            .watches(self.mcis, self._mci_changed)
            .watches(self.clusters, builder.by_name(self.routes.located_on),  # moved by:
                     builder.changed(lambda c: (c.get("status") or {}).get("remedyActions")),
                     observe=self.members.cluster_changed)
            .uses(self.members.secrets)
            .status(resources.MULTI_CLUSTER_INGRESSES, FIELD_MANAGER, frozenset(OWNED_STATUS),
                    frozenset({CONDITION_FAIL_OPEN, CONDITION_LB_READY}),  # the leader's only
                    nested=PORT_STATUS)
            .start_after(self._start, synced=True)  # synced: the load balancer resynced once
            .resync(settings.resync_period, before=self._resync_provider)
            .beside(self.members.pool.run)  # the member clients kept tidy
            .on_stop(self.members.close)
            .on_stop(self.members.pool.close)
            .on_terminal(self.on_terminal)
            .complete(self.reconcile))

    # --- handlers -------------------------------------------------------------------------

    def _mci_changed(self, event: builder.Event) -> list[builder.Request]:
        """Index its routes and Services; the MCI, its route sharers and full MCIs are due."""
        key = informer.key_of(event.obj)
        before, after = self.routes.update(
            key, None if event.type == builder.DELETED else event.obj)
        due = [key]
        if (before is None or after is None or before.claims.keys() != after.claims.keys()
                or self._holding(event.old) != self._holding(event.obj)):
            due += self.routes.sharers(key, before, after)
        if event.type == builder.DELETED or event.obj["metadata"].get("deletionTimestamp"):
            due += self._recheck_capacity()
        return [builder.Request.parse(k) for k in due]

    def _holding(self, obj: Mapping[str, Any] | None) -> bool:
        """Whether an MCI object may hold routes (ours, not being deleted)."""
        return (obj is not None and self.ours(obj)
                and not obj["metadata"].get("deletionTimestamp"))

    def _enqueue_sharers(self, key: str, *analyses: plan.Analysis | None) -> None:
        """Reconcile the MCIs claiming a host and path that ``key`` claims (or claimed)."""
        for other in self.routes.sharers(key, *analyses):
            self._enqueue(other)

    def _enqueue(self, key: str) -> None:
        self.controller.enqueue(builder.Request.parse(key))

    def _recheck_capacity(self) -> list[str]:
        """Slots are freed after their servers drain: full MCIs are due now and after that."""
        full = [key for key, reason in self.failed.items() if reason == CAPACITY_EXCEEDED]
        for key in full:
            self.controller.enqueue_after(builder.Request.parse(key),
                                          self.settings.drain_timeout + 1.0)
        return full

    def _service_changed(self, namespace: str, service: str) -> None:
        for key in self.routes.using(namespace, service):
            self._enqueue(key)

    def _member_changed(self, cluster: str, namespace: str, service: str) -> None:
        if namespace:
            self._service_changed(namespace, service)
        else:  # everything about the cluster may have changed
            self._enqueue_all()

    def _enqueue_all(self) -> None:
        for key in self.mcis.store:
            self._enqueue(key)

    # --- reconcile ------------------------------------------------------------------------

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
        self._forget(key)
        finalizers_now = (obj["metadata"].get("finalizers") or []) if obj is not None else []
        if obj is not None and self.writes and FINALIZER in finalizers_now:
            await self._patch_finalizers(
                obj, "replace", [f for f in obj["metadata"]["finalizers"] if f != FINALIZER])

    def _forget(self, key: str) -> None:
        self.specs.pop(key, None)
        self.failed.pop(key, None)
        self.notices.forget(key)
        self.routes.locate(key, None)
        self.metrics.forget(key)

    async def _add_finalizer(self, obj: Mapping[str, Any]) -> None:
        await self._patch_finalizers(
            obj, "add", [*(obj["metadata"].get("finalizers") or []), FINALIZER])

    async def _patch_finalizers(self, obj: Mapping[str, Any], op: str,
                                finalizers: list[str]) -> None:
        """Set the MCI's finalizers, guarded by the cached resourceVersion (a JSON patch)."""
        await self.api.patch(
            resources.MULTI_CLUSTER_INGRESSES, obj["metadata"]["name"],
            [{"op": "test", "path": "/metadata/resourceVersion",
              "value": obj["metadata"]["resourceVersion"]},
             {"op": op, "path": "/metadata/finalizers", "value": finalizers}],
            namespace=obj["metadata"]["namespace"], patch_type="json")

    def make_plan(self, obj: Mapping[str, Any], model: mci_api.MultiClusterIngress) -> plan.Plan:
        """The plan for one MCI from the current caches; indexes where its Services run."""
        namespace = str(obj["metadata"]["namespace"])
        _, service_keys, _ = plan.routes(model.spec)
        located: dict[str, list[str]] = {}
        for name, _ in service_keys:
            bound = self.bindings.located(namespace, name)  # Karmada's way, when bound
            located[name] = bound if bound is not None else self.members.located(namespace, name)
        # Indexed before the Clusters' remedy actions are read below, in the same step: a
        # change of actions after this read finds the MCI located there and queues it again.
        self.routes.locate(informer.key_of(dict(obj)),
                           frozenset(c for clusters in located.values() for c in clusters))
        endpoints = {
            (cluster, name, port): self.members.endpoints(cluster, namespace, name, port)
            for name, port in service_keys for cluster in located[name]
        }
        ports: dict[tuple[str, str], list[tuple[str, int]] | None] = {}
        for name, _ in service_keys:
            for cluster in located[name]:
                service = self.members.service(cluster, namespace, name)
                ports[(cluster, name)] = None if service is None else [
                    (str(p.get("name") or ""), int(p.get("port") or 0))
                    for p in (service.get("spec") or {}).get("ports") or []]
        fatal, partial = plan.port_problems(service_keys, located, ports)
        actions = {
            str(c["metadata"]["name"]): tuple((c.get("status") or {}).get("remedyActions") or [])
            for c in self.clusters.store.values()
        }
        annotations = obj["metadata"].get("annotations") or {}
        problems = list(partial)
        try:
            weights = plan.parse_weights(annotations.get(plan.WEIGHTS_ANNOTATION))
        except ValueError as exc:
            weights = {}
            problems.insert(0, f"{exc}; using equal weights")
        decided = plan.make_plan(informer.key_of(dict(obj)), model.spec, located, endpoints,
                                 actions, fail_open=self.settings.fail_open, weights=weights)
        return dataclasses.replace(decided, problems=tuple(problems),
                                   missing_ports=tuple(fatal))

    def conflicts(self, key: str, analysis: plan.Analysis) -> dict[str, list[str]]:
        """Older MCIs holding hosts and paths that ``key`` claims: holder -> routes."""
        found: dict[str, list[str]] = {}
        for entry, route in analysis.claims.items():
            for other in self.routes.claimants.get(entry, ()):
                theirs = self.routes.get(other)
                if (other != key and theirs is not None and self._may_hold(other)
                        and theirs.precedence < analysis.precedence
                        and route not in found.setdefault(other, [])):
                    found[other].append(route)
        return found

    def _may_hold(self, key: str) -> bool:
        """Whether MCI ``key`` may keep routes from younger ones (servable, not failing)."""
        obj = self.mcis.store.get(key)
        analysis = self.routes.get(key)
        return (self._holding(obj) and analysis is not None and not analysis.error
                and key not in self.failed)

    async def reconcile(self, request: builder.Request) -> runtime.Result:
        """Converge the load balancer and the status of one MCI."""
        key = request.key
        obj = self.mcis.store.get(key)
        if obj is None:
            await self._delete(key, None)
            return runtime.DONE
        if obj["metadata"].get("deletionTimestamp") or not self.ours(obj):
            if FINALIZER in (obj["metadata"].get("finalizers") or []) or key in self.specs:
                await self._delete(key, obj)
                self._enqueue_sharers(key, self.routes.get(key))
            return runtime.DONE
        if self.writes and FINALIZER not in (obj["metadata"].get("finalizers") or []):
            await self._add_finalizer(obj)
            return runtime.DONE  # the update event brings us back with the finalizer in place
        analysis = self.routes.analyse(key, obj)
        if analysis.error or analysis.model is None:
            raise SpecError(INVALID_SPEC, analysis.error or "the spec cannot be read")
        held = self.conflicts(key, analysis)
        if held:
            raise SpecError(ROUTE_CONFLICT, _conflict_message(held))
        decided = self.make_plan(obj, analysis.model)
        if decided.missing_ports:
            raise SpecError(PORT_NOT_FOUND, _bounded(
                [*decided.missing_ports, "change the MCI's backend port or the Service"]),
                decided)
        self._serving(key, True)
        lb_status = await self._ensure(key, decided)
        self.specs[key] = decided.spec
        self._record_metrics(key, decided, lb_status)  # the load balancer's state, now
        await self._write_status(obj, decided, lb_status)
        missing = decided.missing_services
        self.notices.served(key, obj, decided,
                            self._missing_message(obj, missing) if missing else "")
        return runtime.DONE

    async def _ensure(self, key: str, decided: plan.Plan) -> base.LoadBalancerStatus:
        """Program the load balancer; take contested routes back from younger holders."""
        for attempt in range(2):
            try:
                result: base.LoadBalancerStatus = await self._timed(
                    "ensure", self.provider.ensure_load_balancer(decided.spec))
                return result
            except base.RouteConflict as exc:
                # Held by an MCI that may not keep them from this one (younger, failing,
                # or gone): it loses them; its own reconcile reports the conflict.
                losers = [h for h in exc.holders if h != key and h not in self.conflicts(
                    key, self.routes.analyses[key])]
                if attempt or not losers or len(losers) != len(exc.holders):
                    raise SpecError(ROUTE_CONFLICT, meta.bound_message(
                        str(exc), CONDITION_MESSAGE_BUDGET), decided) from exc
                for loser in losers:
                    log.info("%s: takes its routes back from %s", key, loser)
                    await self._timed("ensure_deleted",
                                      self.provider.ensure_load_balancer_deleted(loser))
                    self.specs.pop(loser, None)
                    self._enqueue(loser)
            except base.InvalidSpec as exc:
                raise SpecError(INVALID_SPEC, _without_key(key, exc), decided) from exc
            except base.CapacityExceeded as exc:
                flag = CAPACITY_SETTINGS.get(exc.setting)
                raise SpecError(CAPACITY_EXCEEDED, _without_key(key, exc) + (
                    f"; raise {flag} and the HAProxy configuration with it, or remove "
                    "endpoints or MCIs" if flag else ""), decided) from exc
        raise AssertionError("unreachable")

    def _serving(self, key: str, serving: bool, reason: str = "") -> None:
        """Note whether ``key`` is served; its route sharers re-check when that changes."""
        was = key not in self.failed
        if serving:
            self.failed.pop(key, None)
        else:
            self.failed[key] = reason
        if was != serving:
            self._enqueue_sharers(key, self.routes.get(key))

    async def on_terminal(self, request: builder.Request, error: runtime.TerminalError) -> None:
        """Report an MCI that cannot be served: False condition, Warning Event, no retry."""
        key = request.key
        obj = self.mcis.store.get(key)
        if obj is None:
            return
        self._serving(key, False, error.reason)
        decided = error.plan if isinstance(error, SpecError) else None
        message = _bounded(error.message.split("; "), CONDITION_MESSAGE_BUDGET - 70)
        served = key in self.specs
        note = ("; the load balancer keeps this MCI's previous configuration" if served
                else "; the MCI is not served")
        current = {k: v for k, v in (obj.get("status") or {}).items() if k in OWNED_STATUS}
        desired: dict[str, Any] = (
            decided.status_fields() if decided is not None else
            {k: v for k, v in current.items() if k in ("serviceLocations",
                                                         "trafficBlockClusters")})
        if served and "loadBalancer" in current:
            desired["loadBalancer"] = current["loadBalancer"]
        lb_ready = meta.Condition(
            type=CONDITION_LB_READY, status=meta.ConditionStatus.FALSE,
            observed_generation=_generation(obj),
            last_transition_time=self.clock.now().replace(microsecond=0),
            reason=error.reason,
            message=message + note)
        others = [c for c in status.live_conditions(obj) if c.type == CONDITION_FAIL_OPEN]
        conditions = status.keep_transition_times(status.live_conditions(obj),
                                                  [*others, lb_ready])
        desired["conditions"] = [c.to_dict() for c in conditions]
        await self._write(obj, current, desired)
        self.notices.failing(key, obj, error, message)

    async def _write_status(self, obj: Mapping[str, Any], decided: plan.Plan,
                            lb_status: base.LoadBalancerStatus) -> None:
        now = self.clock.now().replace(microsecond=0)
        generation = _generation(obj)
        active = [f"{b}: {len(c)} cluster(s) active" for b, c in sorted(lb_status.active.items())]
        notes = [*(f"unsupported non-Service backend at {path}" for path in decided.unsupported),
                 *decided.problems, *decided.left_out()]
        if decided.missing_services:
            lb_ready = (False, SERVICE_NOT_FOUND, _bounded(
                [self._missing_message(obj, decided.missing_services), *active, *notes],
                CONDITION_MESSAGE_BUDGET))
        elif lb_status.ingress:
            lb_ready = (True, "Programmed", f"{self.provider.name}: " + _bounded(
                [*(active or ["no backends"]), *notes],
                CONDITION_MESSAGE_BUDGET - len(self.provider.name) - 2))
        else:
            lb_ready = (False, "NoAddress", f"{self.provider.name}: " + _bounded(
                [*(active or ["no backends"]), *notes],
                CONDITION_MESSAGE_BUDGET - len(self.provider.name) - 2))
        conditions = [
            meta.Condition(
                type=CONDITION_FAIL_OPEN,
                status=meta.ConditionStatus.TRUE if decided.fail_open
                else meta.ConditionStatus.FALSE,
                observed_generation=generation,
                last_transition_time=now,
                reason="AllLocationsBlocked" if decided.fail_open else "NotNeeded",
                message=_fail_open_message(decided) if decided.fail_open
                else "traffic goes only to unblocked clusters",
            ),
            meta.Condition(
                type=CONDITION_LB_READY,
                status=meta.ConditionStatus.TRUE if lb_ready[0] else meta.ConditionStatus.FALSE,
                observed_generation=generation,
                last_transition_time=now,
                reason=lb_ready[1],
                message=lb_ready[2],
            ),
        ]
        conditions = status.keep_transition_times(status.live_conditions(obj), conditions)
        desired: dict[str, Any] = {**decided.status_fields(),
                                   "conditions": [c.to_dict() for c in conditions]}
        ingress = _ingress(lb_status)
        if ingress:
            desired["loadBalancer"] = {"ingress": ingress}
        current = {k: v for k, v in (obj.get("status") or {}).items() if k in OWNED_STATUS}
        await self._write(obj, current, desired)

    def _missing_message(self, obj: Mapping[str, Any], missing: Sequence[str]) -> str:
        namespace = obj["metadata"]["namespace"]
        clusters = sorted(self.clusters.store)
        names = ", ".join(f"{namespace}/{name}" for name in missing)
        return (f"backend Service {names} exists in no member cluster (looked in: "
                f"{', '.join(clusters) or 'no Cluster'}): its routes answer 503 until it does; "
                "create or propagate it, or fix the MCI's service name")

    async def _write(self, obj: Mapping[str, Any], current: Mapping[str, Any],
                     desired: Mapping[str, Any]) -> None:
        """Write the status fields this server declares (Karmada's MCI has no conditions)."""
        if not self.writes:
            return  # a standby: the leader writes the status
        writer = self.controller.writer(resources.MULTI_CLUSTER_INGRESSES)
        wanted = writer.supported(desired)
        if writer.supported(current) != wanted:
            await writer.write(str(obj["metadata"]["name"]), wanted,
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

    # --- background -----------------------------------------------------------------------

    async def _resync_provider(self) -> None:
        """The provider's own resync, before every MCI is queued again."""
        try:
            await self._timed("resync", self.provider.resync(list(self.specs.values())))
        except (base.ProviderError, OSError) as exc:
            log.warning("provider resync failed: %s", exc)

    def _initial_specs(self) -> list[base.LoadBalancerSpec]:
        """The specs of every MCI that can be served now (the older one of a conflict)."""
        specs = []
        for key, obj in self.mcis.store.items():
            analysis = self.routes.get(key)
            if (not self._holding(obj) or analysis is None or analysis.error
                    or analysis.model is None or self.conflicts(key, analysis)):
                continue
            decided = self.make_plan(obj, analysis.model)
            if not decided.missing_ports:
                specs.append(decided.spec)
        return specs

    async def _initial_resync(self) -> None:
        """Make the load balancer match exactly the MCIs we serve (removes leftovers)."""
        specs = self._initial_specs()
        try:
            await self._timed("resync", self.provider.resync(specs))
            self.specs = {spec.key: spec for spec in specs}
        except (base.ProviderError, OSError) as exc:
            log.warning("initial provider resync failed (%s); reconciles will converge", exc)

    async def _start(self) -> None:
        """Before the workers: the bindings and the members loaded, the load balancer resynced."""
        if await self.bindings.detect():
            await self.bindings.start().wait_synced()
        await self.members.start()
        await self.members.wait_loaded(self.settings.member_load_timeout)
        await self._initial_resync()
        self._enqueue_all()


class Notices:
    """The Events saying how an MCI is served: one per change of its state.

    Not again when only a resync or the status changed; none in a standby (the
    leader says it).
    """

    def __init__(self, recorder: events.EventRecorder, writes: bool) -> None:
        self.recorder = recorder
        self.writes = writes
        self._reported: dict[str, tuple[str, str, str]] = {}
        """MCI -> its error last reported (generation, reason, condition message)."""
        self._missing: dict[str, tuple[str, ...]] = {}
        """MCI -> the backend Services last reported as found in no member."""
        self._fail_open: dict[str, bool] = {}
        """MCI -> whether it was last served failing open."""

    def failing(self, key: str, obj: Mapping[str, Any], error: runtime.TerminalError,
                message: str) -> None:
        """A Warning Event per spec and error (``message``: the condition's)."""
        reported = (str(obj["metadata"].get("generation", "")), error.reason, message)
        if self.writes and self._reported.get(key) != reported:
            self.recorder.record(_target(obj), "Warning", error.reason, _bounded(
                error.message.split("; "), EVENT_MESSAGE_BUDGET))
        self._reported[key] = reported

    def served(self, key: str, obj: Mapping[str, Any], decided: plan.Plan,
               missing_message: str) -> None:
        """Served: Events for newly missing Services and a change of fail-open."""
        self._reported.pop(key, None)  # a later error is news again
        missing = decided.missing_services
        if self.writes and missing and self._missing.get(key) != missing:
            self.recorder.record(_target(obj), "Warning", SERVICE_NOT_FOUND,
                                 _bounded([missing_message], EVENT_MESSAGE_BUDGET))
        if missing:
            self._missing[key] = missing
        else:
            self._missing.pop(key, None)
        if self.writes and decided.fail_open != self._fail_open.get(key, False):
            if decided.fail_open:
                self.recorder.record(_target(obj), "Warning", "FailOpen",
                                     _fail_open_message(decided))
            else:
                self.recorder.record(_target(obj), "Normal", "FailOpenEnded",
                                     "blocked clusters no longer cover every location")
        self._fail_open[key] = decided.fail_open

    def forget(self, key: str) -> None:
        """An MCI no longer served: whatever comes next is news."""
        self._reported.pop(key, None)
        self._missing.pop(key, None)
        self._fail_open.pop(key, None)


def _bounded(parts: Sequence[str], budget: int = CONDITION_MESSAGE_BUDGET) -> str:
    """``parts`` joined with "; " within ``budget`` characters, saying how many were left out.

    Each part is cut to half the budget first, so one long part never hides the others.
    """
    return meta.join_limited([meta.bound_message(p, budget // 2) for p in parts], budget, "; ")


def _generation(obj: Mapping[str, Any]) -> int | None:
    generation = obj["metadata"].get("generation")
    return int(generation) if generation is not None else None


def _target(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The MCI as an Event's involved object (list items carry no apiVersion/kind)."""
    return {"apiVersion": resources.MULTI_CLUSTER_INGRESSES.api_version,
            "kind": resources.MULTI_CLUSTER_INGRESSES.kind, **obj}


def _without_key(key: str, exc: Exception) -> str:
    return str(exc).removeprefix(f"{key}: ")


def _conflict_message(held: Mapping[str, Iterable[str]]) -> str:
    parts = [f"{', '.join(routes)} already served for MCI {holder} (older: it keeps them)"
             for holder, routes in sorted(held.items())]
    return _bounded([*parts, "change the host or path, or remove it from the other MCI"])


def _ingress(lb_status: base.LoadBalancerStatus) -> list[dict[str, Any]]:
    by_ip: dict[str, list[int]] = {}
    for ip, port in lb_status.ingress:
        by_ip.setdefault(ip, []).append(port)
    limit = mci_api.MAX_LOAD_BALANCER_INGRESS
    return [{"ip": ip, "ports": [{"port": p, "protocol": "TCP"} for p in sorted(ports)[:limit]]}
            for ip, ports in sorted(by_ip.items())[:limit]]


def _fail_open_message(decided: plan.Plan) -> str:
    clusters = meta.join_limited(decided.traffic_block_clusters,
                                 CONDITION_MESSAGE_BUDGET - 100)
    return (f"every located cluster is blocked ({clusters}): "
            "serving from all of them rather than from none")
