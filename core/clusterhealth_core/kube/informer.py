"""A list-then-watch cache of one resource, so controllers read memory, not the API.

The informer lists, then watches from the list's ``resourceVersion``; when the
watch ends it resumes from the last seen version, and when that version is
too old (410 Gone) or the server is unreachable it relists after a backoff.
Handlers get every change; :meth:`Informer.wait_synced` tells when the first
list has been loaded.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from clusterhealth_core import retry
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources

log = logging.getLogger(__name__)

Object = dict[str, Any]
Handler = Callable[[str, Object, Object | None], None]
"""``handler(event_type, new_or_deleted_object, previous_object_or_None)``."""


_RELIST_BACKOFF = retry.Backoff(initial=0.5, maximum=10.0, attempts=1_000_000)


def key_of(obj: Object) -> str:
    """``namespace/name`` (or ``name`` for cluster-scoped objects)."""
    meta = obj.get("metadata", {})
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else str(meta["name"])


class Informer:
    """Keeps ``store`` equal to the server's objects of one resource."""

    def __init__(
        self,
        api: kube.ApiClient,
        resource: resources.Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        backoff: retry.Backoff = _RELIST_BACKOFF,
        watch_timeout: int = 300,
    ) -> None:
        self.api = api
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.backoff = backoff
        self.watch_timeout = watch_timeout
        self.store: dict[str, Object] = {}
        self._handlers: list[Handler] = []
        self._synced = asyncio.Event()

    def add_handler(self, handler: Handler) -> None:
        """Call ``handler`` for every change (including the initial list as ADDED)."""
        self._handlers.append(handler)

    @property
    def synced(self) -> bool:
        """Whether the first list has been loaded."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        """Wait until the first list has been loaded."""
        await self._synced.wait()

    def _emit(self, event: str, obj: Object, old: Object | None) -> None:
        for handler in self._handlers:
            try:
                handler(event, obj, old)
            except Exception:  # a handler bug must not stop the cache
                log.exception("informer handler failed for %s %s", event, key_of(obj))

    def _replace(self, items: list[Object]) -> None:
        fresh = {key_of(item): item for item in items}
        for key, old in list(self.store.items()):
            if key not in fresh:
                del self.store[key]
                self._emit("DELETED", old, old)
        for key, item in fresh.items():
            previous = self.store.get(key)
            self.store[key] = item
            if previous is None:
                self._emit("ADDED", item, None)
            elif previous.get("metadata", {}).get("resourceVersion") != item["metadata"].get(
                "resourceVersion"
            ):
                self._emit("MODIFIED", item, previous)

    def _apply(self, event: kube.WatchEvent) -> None:
        obj = event.object
        key = key_of(obj)
        old = self.store.get(key)
        if event.type == "DELETED":
            self.store.pop(key, None)
            self._emit("DELETED", obj, old)
        else:
            self.store[key] = obj
            self._emit("ADDED" if old is None else "MODIFIED", obj, old)

    async def run(self) -> None:
        """List and watch forever (until cancelled)."""
        failures = 0
        while True:
            try:
                listing = await self.api.list(
                    self.resource, namespace=self.namespace, label_selector=self.label_selector
                )
                self._replace(list(listing.get("items") or []))
                self._synced.set()
                version = str(listing["metadata"].get("resourceVersion", ""))
                failures = 0
                while True:
                    async for event in self.api.watch(
                        self.resource, namespace=self.namespace, resource_version=version,
                        label_selector=self.label_selector, timeout_seconds=self.watch_timeout,
                    ):
                        version = str(event.object.get("metadata", {}).get(
                            "resourceVersion", version))
                        if event.type != "BOOKMARK":
                            self._apply(event)
            except errors.Gone:
                log.debug("watch of %s expired; relisting", self.resource.plural)
            except (errors.KubeError, OSError) as exc:
                delay = self.backoff.delay(min(failures, 10))
                failures += 1
                log.warning("informer for %s: %s; relisting in %.1fs",
                            self.resource.plural, exc, delay)
                await asyncio.sleep(delay)
