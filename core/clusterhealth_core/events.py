"""Kubernetes Events, so ``kubectl describe`` shows what a controller did and why.

Events about cluster-scoped objects (a Cluster) are written to a namespace of
the controller's choosing (``default`` by convention).  A repeated event
(same object, reason and message) is counted on the existing Event instead of
creating a new one, as client-go's recorder does; recording never raises.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from clusterhealth_core import clock as clocks
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources

log = logging.getLogger(__name__)


@dataclasses.dataclass
class _Seen:
    name: str
    count: int


class EventRecorder:
    """Writes ``core/v1`` Events on behalf of one component."""

    def __init__(self, api: kube.ApiClient, component: str, namespace: str,
                 clock: clocks.Clock) -> None:
        self.api = api
        self.component = component
        self.namespace = namespace
        self.clock = clock
        self._seen: dict[tuple[str, str, str], _Seen] = {}

    async def record(self, obj: Mapping[str, Any], type_: str, reason: str,
                     message: str) -> None:
        """Record an event about ``obj`` (``Normal`` or ``Warning``)."""
        meta = obj.get("metadata", {})
        uid = str(meta.get("uid", ""))
        key = (uid, reason, message)
        now = clocks.format_rfc3339(self.clock.now())
        namespace = meta.get("namespace") or self.namespace
        try:
            seen = self._seen.get(key)
            if seen is not None:
                seen.count += 1
                await self.api.patch(resources.EVENTS, seen.name,
                                     {"count": seen.count, "lastTimestamp": now},
                                     namespace=namespace)
                return
            name = f"{meta.get('name', 'object')}.{uuid.uuid4().hex[:12]}"
            await self.api.create(resources.EVENTS, {
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {
                    "apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""),
                    "name": meta.get("name", ""), "uid": uid,
                    "resourceVersion": meta.get("resourceVersion", ""),
                    **({"namespace": meta["namespace"]} if meta.get("namespace") else {}),
                },
                "type": type_, "reason": reason, "message": message[:1024],
                "source": {"component": self.component},
                "reportingComponent": self.component,
                "firstTimestamp": now, "lastTimestamp": now, "count": 1,
            })
            if len(self._seen) > 4096:
                self._seen.clear()
            self._seen[key] = _Seen(name, 1)
        except (errors.KubeError, OSError) as exc:
            log.warning("could not record event %s on %s: %s", reason, meta.get("name"), exc)
