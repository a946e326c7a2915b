"""What the API server says about a resource we write: its schema and its subresources.

Our add-ons write to servers they do not own.  The same ``Cluster`` kind is a
CRD with ``status.conditions`` as a list-map on our control plane, and an
aggregated API on Karmada's where the list is atomic (one server-side apply
replaces the whole list) and ``status.remedyActionSources`` does not exist;
Karmada's Remedy CRD has no status at all.  Writers must not guess, nor ask
the user for a flag: they read the server's OpenAPI v3 document and its
discovery, once, at start, and decide from that (:class:`Kind`).

Reading the schema follows ``$ref`` and ``allOf`` (aggregated servers
publish referenced definitions; CRDs publish inline schemas), array
``items``, and treats ``x-kubernetes-preserve-unknown-fields`` as declaring
everything beneath.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources

log = logging.getLogger(__name__)

_REF_PREFIX = "#/components/schemas/"
OPENAPI_ATTEMPTS = 10
"""A CRD's OpenAPI document appears shortly after the CRD is established: try again."""


@dataclasses.dataclass(frozen=True)
class Kind:
    """The server's view of one resource: schema (if published) and status subresource."""

    resource: resources.Resource
    status_subresource: bool
    root: Mapping[str, Any] | None
    """The resolved schema of the kind, or None when the server publishes none."""
    definitions: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def known(self) -> bool:
        """Whether the server published a schema for the kind."""
        return self.root is not None

    def _resolve(self, node: Mapping[str, Any]) -> Mapping[str, Any]:
        seen = 0
        while seen < 32:  # $ref chains are short; a cycle must not hang us
            seen += 1
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
                node = self.definitions.get(ref[len(_REF_PREFIX):], {})
                continue
            parts = node.get("allOf")
            if isinstance(parts, list) and len(parts) == 1 and not node.get("properties"):
                node = parts[0]
                continue
            return node
        return node

    def node(self, *path: str) -> Mapping[str, Any] | None:
        """The schema at ``path`` (``"status", "conditions"``), or None if undeclared.

        With no published schema every path counts as declared (an empty node).
        """
        if self.root is None:
            return {}
        current = self._resolve(self.root)
        for name in path:
            if current.get("x-kubernetes-preserve-unknown-fields"):
                return {}
            if name == "[]":
                items = current.get("items")
                if not isinstance(items, Mapping):
                    return None
                current = self._resolve(items)
                continue
            properties = current.get("properties")
            if not isinstance(properties, Mapping) or name not in properties:
                extra = current.get("additionalProperties")
                if isinstance(extra, Mapping):
                    current = self._resolve(extra)
                    continue
                return None
            current = self._resolve(properties[name])
        return current

    def declares(self, *path: str) -> bool:
        """Whether the server's schema has ``path``."""
        return self.node(*path) is not None

    def list_type(self, *path: str) -> str:
        """``map``, ``set`` or ``atomic`` (the default) for the list at ``path``.

        An unpublished schema answers ``unknown``: callers then use the write
        that is safe under every list type.
        """
        if self.root is None:
            return "unknown"
        found = self.node(*path)
        if found is None:
            return "atomic"
        return str(found.get("x-kubernetes-list-type") or "atomic")

    def undeclared_status_fields(self, fields: Mapping[str, Any] | list[str]) -> list[str]:
        """The top-level ``status`` fields among ``fields`` the server does not declare."""
        return sorted(name for name in fields if not self.declares("status", name))


def _find_kind(schemas: Mapping[str, Any],
               resource: resources.Resource) -> Mapping[str, Any] | None:
    for body in schemas.values():
        for gvk in body.get("x-kubernetes-group-version-kind") or []:
            if (gvk.get("group", "") == resource.group and gvk.get("version") == resource.version
                    and gvk.get("kind") == resource.kind):
                return dict(body)
    return None


async def _openapi(api: kube.ApiClient, resource: resources.Resource
                   ) -> tuple[Mapping[str, Any] | None, Mapping[str, Any]]:
    key = f"apis/{resource.group}/{resource.version}" if resource.group \
        else f"api/{resource.version}"
    for attempt in range(OPENAPI_ATTEMPTS):
        try:
            index = await api.request("GET", "/openapi/v3")
            entry = ((index or {}).get("paths") or {}).get(key) or {}
            url = entry.get("serverRelativeURL") or f"/openapi/v3/{key}"
            document = await api.request("GET", str(url).split("?", 1)[0])
        except errors.NotFound:
            await asyncio.sleep(0.2 * (attempt + 1))
            continue
        schemas = ((document or {}).get("components") or {}).get("schemas") or {}
        root = _find_kind(schemas, resource)
        if root is not None:
            return root, schemas
        await asyncio.sleep(0.2 * (attempt + 1))
    log.warning("the API server publishes no OpenAPI schema for %s: writes assume every "
                "field is declared and use the writes safe under any list type",
                resource.crd_name)
    return None, {}


async def discover(api: kube.ApiClient, resource: resources.Resource) -> Kind:
    """Read the server's discovery and OpenAPI v3 document for ``resource``."""
    base = f"/apis/{resource.group}/{resource.version}" if resource.group \
        else f"/api/{resource.version}"
    listing = await api.request("GET", base)
    names = {str(r.get("name")) for r in (listing or {}).get("resources") or []}
    root, definitions = await _openapi(api, resource)
    return Kind(resource, f"{resource.plural}/status" in names, root, definitions)
