"""Service locations the Karmada way: from the Service's ResourceBinding.

When the control plane serves ``work.karmada.io/v1alpha2 ResourceBinding``
(a real Karmada, or our failover control plane once it propagates
workloads), the binding of Service ``ns/name`` lists the clusters it was
scheduled to, and that is where the Service runs.  Without a binding the
controller falls back to discovery in the members (:mod:`clusterhealth_mci.memberservices`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, informer, resources

log = logging.getLogger(__name__)


def bound_service(binding: dict[str, Any]) -> tuple[str, str] | None:
    """``(namespace, name)`` of the Service a binding places, if it places a Service."""
    resource = (binding.get("spec") or {}).get("resource") or {}
    if resource.get("kind") != "Service" or resource.get("apiVersion", "v1") != "v1":
        return None
    namespace = resource.get("namespace") or binding["metadata"].get("namespace", "")
    return str(namespace), str(resource.get("name", ""))


def clusters_of(binding: dict[str, Any]) -> list[str]:
    """The clusters a binding is scheduled to (``spec.clusters[].name``), sorted."""
    return sorted({str(target["name"]) for target in
                   (binding.get("spec") or {}).get("clusters") or [] if target.get("name")})


binding_fields = informer.keep_fields("spec.resource", "spec.clusters")
"""What the controller reads of a ResourceBinding."""


class Bindings:
    """A cache of ResourceBindings of Services (empty where the API is not served)."""

    def __init__(self, api: kube.ApiClient, informers: informer.InformerFactory,
                 on_change: Callable[[str, str], None]) -> None:
        self.api = api
        self.informers = informers
        self.served = False
        self.cache: informer.Informer | None = None
        self._by_service: dict[tuple[str, str], str] = {}
        self._service_of: dict[str, tuple[str, str]] = {}
        self._on_change = on_change

    async def detect(self) -> bool:
        """Whether the control plane serves ResourceBindings (checked once, one object read)."""
        try:
            async for _ in self.api.list_pages(resources.RESOURCE_BINDINGS, limit=1):
                break  # one page (of at most one object) tells
        except errors.NotFound:
            log.info("no ResourceBinding API: service locations come from discovery")
            self.served = False
        else:
            self.served = True
        return self.served

    def start(self) -> informer.Informer:
        """The shared informer on ResourceBindings (call when :meth:`detect` said served)."""
        if self.cache is None:
            self.cache = self.informers.informer(resources.RESOURCE_BINDINGS,
                                                 transform=binding_fields)
            self.cache.add_handler(self._changed)
        return self.cache

    def _changed(self, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        for binding in (old, obj):
            service = bound_service(binding) if binding else None
            if service is not None:
                self._on_change(*service)
        key = informer.key_of(obj)
        service = bound_service(obj)
        previous = self._service_of.pop(key, None)
        if previous is not None and self._by_service.get(previous) == key:
            del self._by_service[previous]
        if service is not None and event != "DELETED":
            self._by_service[service] = key
            self._service_of[key] = service

    def located(self, namespace: str, name: str) -> list[str] | None:
        """The bound clusters of Service ``namespace/name``, or None without a binding."""
        key = self._by_service.get((namespace, name))
        binding = self.cache.store.get(key) if key and self.cache is not None else None
        return clusters_of(binding) if binding is not None else None
