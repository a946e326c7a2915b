"""The kinds the detector's policies select: their template caches, whether they are served.

Why: a policy names kinds known only at run time.  Each selected kind is resolved
through discovery and gets a template cache (shared with the binding controller),
watched by the detector's template queue once made; a kind this API server does
not serve, or whose cache does not load (one the controller manager may not read),
is remembered so that the policies selecting it say so (their
``ResourcesSelected`` condition).  :class:`SelectedKinds` holds that state with
the reconcile of the ``detector-kinds`` queue that keeps it, apart from the
templates' and policies' reconciles.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

from clusterhealth_controlplane import manager
from clusterhealth_controlplane.binding import decision as binding
from clusterhealth_core import builder, reconcile
from clusterhealth_core.kube import discovery, informer

log = logging.getLogger(__name__)

SYNC_POLL = 0.5
"""Seconds between looks at a newly selected kind's cache while it loads (the kinds worker
never waits for one: a kind it may not read never loads, and must not hold up the others)."""
SYNC_TIMEOUT = 10.0
"""A selected kind whose cache has not loaded after this long is reported unreadable."""
UNREADABLE_RETRY = 30.0
"""Seconds between looks at a kind reported unreadable."""


@dataclasses.dataclass(frozen=True)
class TemplateKey:
    """One resource template: its apiVersion, kind, namespace (or "") and name."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @property
    def request(self) -> builder.Request:
        """Its request: the kind as ``Kind.apiVersion`` (kinds have no dot)."""
        return builder.Request(self.namespace, self.name, f"{self.kind}.{self.api_version}")

    @classmethod
    def of(cls, request: builder.Request) -> TemplateKey:
        """The inverse of :attr:`request`."""
        kind, _, api_version = request.kind.partition(".")
        return cls(api_version, kind, request.namespace, request.name)


def template_request(api_version: str, kind: str, obj: Mapping[str, Any]) -> builder.Request:
    """The request of a template of a kind."""
    meta_ = obj.get("metadata") or {}
    return TemplateKey(api_version, kind, str(meta_.get("namespace") or ""),
                       str(meta_["name"])).request


def _templates(api_version: str, kind: str) -> builder.MapFunc:
    """The map of a template cache: each template is its request."""
    return lambda event: (template_request(api_version, kind, event.obj),)


class SelectedKinds:
    """Every kind a policy selects: its template cache, and whether it is served and readable.

    ``templates()``: the detector's template queue (watches the caches, takes their
    templates); ``changed(api_version, kind)``: a kind became (un)served or
    (un)readable (the policies selecting it are queued).
    """

    def __init__(self, context: manager.Context, templates: Callable[[], builder.Controller],
                 changed: Callable[[str, str], None]) -> None:
        self._queue = templates
        self._changed = changed
        self.templates = manager.Templates(context, self._watch)
        """One informer per selected kind."""
        self.unserved: set[tuple[str, str]] = set()
        """Selected kinds this API server did not serve when last asked."""
        self.unreadable: dict[tuple[str, str], str] = {}
        """Selected kinds whose cache has not loaded, with the informer's last error."""

    def every_template(self) -> list[builder.Request]:
        """The request of every cached template of a selected kind (a resync)."""
        return [template_request(api_version, kind, obj)
                for (api_version, kind), (_, cache) in self.templates.caches.items()
                if cache.synced for obj in cache.store.values()]

    def _watch(self, api_version: str, kind: str, cache: informer.Informer) -> None:
        self._queue().watch(cache, _templates(api_version, kind),
                            builder.changed(binding.template_state))  # not a status write

    async def reconcile(self, request: builder.Request) -> reconcile.Result | None:
        """Make sure the kind has a template informer; queue all of its templates."""
        api_version, kind = request.kind, request.name
        try:
            _, cache = await self.templates.get(api_version, kind)
        except discovery.NotServed:
            log.warning("a policy selects %s %s, which this API server does not serve; "
                        "asking again later", kind, api_version)
            if (api_version, kind) not in self.unserved:
                self.unserved.add((api_version, kind))
                self._changed(api_version, kind)  # their condition says so
            return reconcile.Result(requeue_after=30.0)
        if (api_version, kind) in self.unserved:  # served now
            self.unserved.discard((api_version, kind))
            self._changed(api_version, kind)
        if not cache.synced:
            if cache.loading_for() < SYNC_TIMEOUT:
                return reconcile.Result(requeue_after=SYNC_POLL)
            why = cache.last_error or f"its list has not loaded in {SYNC_TIMEOUT:.0f}s"
            if self.unreadable.get((api_version, kind)) != why:
                log.warning("a policy selects %s %s, which cannot be listed (%s); its "
                            "templates are not propagated until it can", kind, api_version, why)
                self.unreadable[(api_version, kind)] = why
                self._changed(api_version, kind)
            return reconcile.Result(requeue_after=UNREADABLE_RETRY)
        if self.unreadable.pop((api_version, kind), None) is not None:
            log.info("%s %s can be listed now", kind, api_version)
            self._changed(api_version, kind)
        for obj in cache.store.values():
            self._queue().enqueue(template_request(api_version, kind, obj))
        return None
