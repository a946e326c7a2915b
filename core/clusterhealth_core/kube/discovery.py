"""From ``apiVersion`` and ``kind`` to the resource to call: the API server's discovery.

A policy selects templates by apiVersion and kind, and a Work carries
manifests of any kind; to list, watch or apply them the client needs the
plural name and whether the kind is namespaced, which only the server's
discovery document says.  :class:`Discovery` asks once per group-version and
remembers the answer (a kind the server does not serve is asked again after
``retry_after`` seconds: a CRD may be installed meanwhile).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources


class NotServed(errors.KubeError):
    """The server does not serve this apiVersion and kind."""


class Discovery:
    """Resolve kinds through one API server's discovery, with a cache."""

    def __init__(self, api: kube.ApiClient, *, retry_after: float = 30.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self.retry_after = retry_after
        self.monotonic = monotonic
        self._served: dict[str, dict[str, resources.Resource]] = {}
        self._missing: dict[str, float] = {}

    async def _group_version(self, api_version: str) -> dict[str, resources.Resource]:
        known = self._served.get(api_version)
        if known is not None:
            return known
        missed = self._missing.get(api_version)
        if missed is not None and self.monotonic() - missed < self.retry_after:
            return {}
        group, _, version = api_version.rpartition("/")
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            listing = await self.api.request("GET", path)
        except errors.NotFound:
            self._missing[api_version] = self.monotonic()
            return {}
        kinds: dict[str, resources.Resource] = {}
        for entry in (listing or {}).get("resources") or []:
            name = str(entry.get("name", ""))
            if "/" in name or not entry.get("kind"):
                continue  # a subresource (deployments/status)
            kinds.setdefault(str(entry["kind"]), resources.Resource(
                group, version, name, str(entry["kind"]), namespaced=bool(entry.get("namespaced"))))
        self._served[api_version] = kinds
        self._missing.pop(api_version, None)
        return kinds

    async def resource(self, api_version: str, kind: str) -> resources.Resource:
        """The resource serving ``kind`` at ``api_version``; :class:`NotServed` if none."""
        found = (await self._group_version(api_version)).get(kind)
        if found is None:
            raise NotServed(f"{kind} {api_version} is not served by this API server")
        return found

    def forget(self, api_version: str | None = None) -> None:
        """Ask again next time (a CRD changed), for one group-version or all."""
        if api_version is None:
            self._served.clear()
            self._missing.clear()
        else:
            self._served.pop(api_version, None)
            self._missing.pop(api_version, None)
