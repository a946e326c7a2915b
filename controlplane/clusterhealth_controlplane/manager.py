"""Several controllers in one process and one term of leadership, as Karmada's manager.

Karmada runs its controllers in one ``karmada-controller-manager`` behind one
Lease, each switchable with ``--controllers``.  :class:`Manager` is that
composite for our runtime: the term (fenced client, shared informers, Event
recorder) is made once by :class:`clusterhealth_core.runner.ElectedController`,
every selected controller is built from a :class:`Context` over it, and the
manager is synced when all of them are and runs them all until cancelled (one
failing ends the term, so that a fresh one starts from clean caches).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from clusterhealth_controlplane import metrics, options, vocabulary
from clusterhealth_core import builder, members, runner
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import discovery, informer, resources

CLUSTER_SECRET_NAMESPACE = "karmada-cluster"
"""Where Karmada keeps the members' credential Secrets (``Cluster.spec.secretRef``)."""

MANAGED_SELECTOR = f"{vocabulary.MANAGED}=true"
"""The member objects Works made (:attr:`Context.member_objects` watches only those)."""


def secret_fields(obj: informer.Object) -> informer.Object:
    """A Secret as the member pool needs it: name, version and data, nothing else."""
    meta = obj.get("metadata") or {}
    return {"metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion", "uid")
                         if k in meta}, "data": obj.get("data") or {}}


@dataclasses.dataclass
class Context:
    """What every controller of the manager is built from."""

    term: runner.Term
    workers: int
    resync_period: float
    options: options.Options = dataclasses.field(default_factory=options.Options)
    """The failover timers and limits (``--cluster-*``, ``--eviction-*``, ...)."""
    metrics: metrics.FailoverMetrics = dataclasses.field(default_factory=metrics.FailoverMetrics)
    """The failover metric families, made once per process (a private registry by default)."""
    secret_namespace: str = CLUSTER_SECRET_NAMESPACE
    controllers: frozenset[str] = frozenset()
    """The names of the controllers running in this manager (set by :class:`Manager`), for
    a controller whose behaviour depends on another's (execution waits for the namespaces
    that the namespace sync makes)."""
    member_limits: kube.Limits = members.LIMITS
    """What one member may cost (``--member-request-timeout``,
    ``--member-concurrent-requests``)."""
    _members: members.MemberClients | None = None
    _discovery: discovery.Discovery | None = None
    _member_objects: members.MemberKinds | None = None

    # (above ``members``: below it, that name in this class body is the property, not the module)
    @property
    def member_objects(self) -> members.MemberKinds:
        """Watches on the objects Works put in the members, shared by the term's controllers.

        The execution controller puts back member objects changed or deleted by
        hand and the work-status controller reports their status: both read the
        same informers, one per member and kind a Work carries there (started
        when a Work first does), on the objects labelled ``karmada.io/managed=true``
        only; :class:`~clusterhealth_core.members.MemberKinds` says what a new
        client or a deleted Cluster does to them.
        """
        if self._member_objects is None:
            self._member_objects = members.MemberKinds(
                self.members, clock=self.term.clock, label_selector=MANAGED_SELECTOR)
        return self._member_objects

    @property
    def members(self) -> members.MemberClients:
        """The member-client pool, shared by every controller of the term (made on first use)."""
        if self._members is None:
            secrets = self.term.informers.informer(
                resources.SECRETS, namespace=self.secret_namespace, transform=secret_fields)
            self._members = members.MemberClients(
                self.term.api, secrets=secrets,
                clusters=self.term.informers.informer(resources.CLUSTERS),
                user_agent="clusterhealth-controlplane", limits=self.member_limits,
                clock=self.term.clock, secret_namespace=self.secret_namespace)
        return self._members

    @property
    def discovery(self) -> discovery.Discovery:
        """The control plane's kinds (apiVersion + kind -> resource), asked once per term."""
        if self._discovery is None:
            self._discovery = discovery.Discovery(self.term.api)
        return self._discovery

    async def run(self) -> None:
        """Keep the member clients tidy until cancelled (deleted Clusters, replaced clients)."""
        if self._members is None:
            await asyncio.Event().wait()  # no controller of this term talks to members
        assert self._members is not None
        await self._members.run()

    async def close(self) -> None:
        """Stop the member watches and close the member clients made during the term."""
        if self._member_objects is not None:
            await self._member_objects.close()
            self._member_objects = None
        if self._members is not None:
            await self._members.close()
            self._members = None


class Twins:
    """The caches of a namespaced kind and its cluster-scoped twin, followed as one.

    Most controllers treat the two kinds alike: they watch both caches with the
    same declaration (:attr:`informers`, a tuple the builder takes) and look an
    object up in the cache its reference names (a reference with no namespace
    is the cluster-scoped kind's).
    """

    def __init__(self, term: runner.Term, namespaced: resources.Resource,
                 cluster: resources.Resource) -> None:
        self.namespaced = term.informers.informer(namespaced)
        self.cluster = term.informers.informer(cluster)
        self.informers = (self.namespaced, self.cluster)

    def get(self, ref: vocabulary.BindingRef | builder.Request) -> dict[str, Any] | None:
        """The cached object ``ref`` names, or None."""
        if ref.namespace:
            return self.namespaced.store.get(f"{ref.namespace}/{ref.name}")
        return self.cluster.store.get(ref.name)

    def objects(self) -> Iterator[dict[str, Any]]:
        """Every cached object, the namespaced ones first."""
        for cache in self.informers:
            yield from list(cache.store.values())


class Bindings(Twins):
    """Both binding caches (ResourceBindings, ClusterResourceBindings), followed as one."""

    def __init__(self, term: runner.Term) -> None:
        super().__init__(term, resources.RESOURCE_BINDINGS, resources.CLUSTER_RESOURCE_BINDINGS)


class Policies(Twins):
    """Both propagation policy caches (PropagationPolicies, ClusterPropagationPolicies)."""

    def __init__(self, term: runner.Term) -> None:
        super().__init__(term, resources.PROPAGATION_POLICIES,
                         resources.CLUSTER_PROPAGATION_POLICIES)


class Templates:
    """Templates by kind: one shared cache per kind, the kind resolved through discovery once.

    The binding, binding-status and detector controllers each meet templates of
    kinds known only at run time.  :meth:`get` asks discovery for a kind the first
    time (:class:`discovery.NotServed` when the API server does not serve it) and
    takes its cache from the term's shared informers; ``watch(api_version, kind,
    cache)``, if given, is told of each new cache (a controller watching it).
    """

    def __init__(self, context: Context,
                 watch: Callable[[str, str, informer.Informer], object] | None = None) -> None:
        self.context = context
        self._watch = watch
        self.caches: dict[tuple[str, str], tuple[resources.Resource, informer.Informer]] = {}
        """By (apiVersion, kind): the kind's resource and its cache."""

    def known(self, api_version: str, kind: str
              ) -> tuple[resources.Resource, informer.Informer] | None:
        """The kind's resource and cache if :meth:`get` made them, else None."""
        return self.caches.get((api_version, kind))

    async def get(self, api_version: str, kind: str
                  ) -> tuple[resources.Resource, informer.Informer]:
        """The kind's resource and cache (made on first use; may raise NotServed)."""
        found = self.caches.get((api_version, kind))
        if found is None:
            resource = await self.context.discovery.resource(api_version, kind)
            cache = self.context.term.informers.informer(resource)
            found = self.caches[(api_version, kind)] = (resource, cache)
            if self._watch is not None:
                self._watch(api_version, kind, cache)
        return found


def binding_of_work(work: informer.Object) -> builder.Request | None:
    """The request of the binding a Work was made for (None: not a binding's Work)."""
    ref = vocabulary.binding_of_work(work)
    return None if ref is None else builder.Request(ref.namespace, ref.name)


def work_index() -> builder.Index[str, builder.Request]:
    """Works (``namespace/name``) by the binding they were made for: a Work watch's ``observe``.

    :meth:`builder.Index.on` with a binding's request gives its Works.
    """
    return builder.Index(informer.key_of,
                         lambda work: [r for r in (binding_of_work(work),) if r is not None])


class MemberWorks:
    """Member objects -> the Works that made them, for a controller following the members.

    The execution and work-status controllers both follow the objects Works put in
    the members (:attr:`Context.member_objects`): a change requests the Work that
    made the object (its annotations name it, in that member's execution
    namespace); a member's caches gone (a new client, a deleted Cluster), every
    Work of that member.  ``changed(event, obj, old)`` keeps the changes that
    matter (all by default); ``gone(cluster)`` is told of a member's caches going.
    """

    def __init__(self, works: informer.Informer, controller: builder.Controller,
                 changed: Callable[[str, informer.Object, informer.Object | None], bool]
                 | None = None, gone: Callable[[str], object] | None = None) -> None:
        self.works = works
        self.controller = controller
        self.changed = changed
        self.gone = gone

    def of_cluster(self, cluster: str) -> list[builder.Request]:
        """The requests of every Work of ``cluster``."""
        namespace = vocabulary.execution_namespace(cluster)
        return [builder.Request(namespace, str(work["metadata"]["name"]))
                for work in list(self.works.store.values())
                if (work.get("metadata") or {}).get("namespace") == namespace]

    def listener(self, cluster: str, event: str, obj: informer.Object | None,
                 old: informer.Object | None) -> None:
        """A :data:`members.ObjectListener`: queue the Works an event concerns."""
        if not event or obj is None:
            if self.gone is not None:
                self.gone(cluster)
            for request in self.of_cluster(cluster):
                self.controller.enqueue(request)
            return
        if self.changed is not None and not self.changed(event, obj, old):
            return
        work = vocabulary.work_of(obj)
        if work is not None and vocabulary.cluster_of(work[0]) == cluster:
            self.controller.enqueue(builder.Request(work[0], work[1]))


Factory = Callable[[Context], runner.Controller]


@dataclasses.dataclass(frozen=True)
class Entry:
    """One row of the controller table: its ``--controllers`` name and how to build it."""

    name: str
    summary: str
    make: Factory


class Controller(builder.Declared):
    """A controller of the manager: the term's client, clock and recorder, and the metrics.

    What every controller took from its :class:`Context` first, and the term's
    shared caches of the kinds most of them follow (:attr:`clusters`,
    :attr:`works`, :attr:`bindings`: asked for on first use, in ``__init__``
    where the builder declares them); the rest it declares.
    """

    def __init__(self, context: Context) -> None:
        super().__init__(context.term)
        self.metrics = context.metrics

    @functools.cached_property
    def clusters(self) -> informer.Informer:
        """The term's Cluster cache."""
        return self.term.informers.informer(resources.CLUSTERS)

    @functools.cached_property
    def works(self) -> informer.Informer:
        """The term's Work cache."""
        return self.term.informers.informer(resources.WORKS)

    @functools.cached_property
    def bindings(self) -> Bindings:
        """The term's caches of both binding kinds."""
        return Bindings(self.term)


class Manager:
    """The selected controllers of one term, as one :class:`runner.Controller`."""

    def __init__(self, context: Context, entries: Sequence[Entry]) -> None:
        self.context = context
        context.controllers = frozenset(entry.name for entry in entries)
        self.parts = {entry.name: entry.make(context) for entry in entries}

    @property
    def synced(self) -> bool:
        """Whether every controller's caches have loaded."""
        return all(part.synced for part in self.parts.values())

    async def run(self) -> None:
        """Run every controller until cancelled (or until one fails)."""
        try:
            async with asyncio.TaskGroup() as group:
                for name, part in self.parts.items():
                    group.create_task(part.run(), name=f"controller:{name}")
                group.create_task(self.context.run(), name="member-clients")
        finally:
            await self.context.close()
