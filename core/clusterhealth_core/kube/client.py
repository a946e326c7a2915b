"""An asyncio client for the Kubernetes API, small enough for a DaemonSet.

It speaks JSON over :mod:`~clusterhealth_core.kube.transport` (HTTP/1.1 on
asyncio streams) and knows nothing about particular kinds beyond
:class:`~clusterhealth_core.kube.resources.Resource`.  Transient failures
(connection errors, 429, 5xx) are retried with :class:`~clusterhealth_core.retry.Backoff`;
everything else surfaces as a typed :mod:`~clusterhealth_core.kube.errors` error.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Literal

from clusterhealth_core import retry
from clusterhealth_core.kube import config, errors, resources, transport

log = logging.getLogger(__name__)

PatchType = Literal["merge", "json", "strategic", "apply"]
_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}
Guard = Callable[[], None]
_WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
Object = dict[str, Any]


class WatchEvent:
    """One event of a watch stream: ``ADDED``, ``MODIFIED``, ``DELETED`` or ``BOOKMARK``."""

    __slots__ = ("object", "type")

    def __init__(self, type_: str, obj: Object) -> None:
        self.type = type_
        self.object = obj

    def __repr__(self) -> str:
        name = self.object.get("metadata", {}).get("name")
        return f"WatchEvent({self.type}, {name})"


class ApiClient:
    """A connection pool to one API server with the credentials to use it."""

    def __init__(
        self,
        credentials: config.Credentials,
        *,
        timeout: float = 10.0,
        backoff: retry.Backoff = retry.DEFAULT,
        user_agent: str = "clusterhealth",
        max_idle: int = 4,
    ) -> None:
        self.credentials = credentials
        self.timeout = timeout
        self.backoff = backoff
        self._tokens = config.TokenSource(credentials)
        self._user_agent = user_agent
        self._max_idle = max_idle
        self._transport: transport.HttpTransport | None = None
        self._guard: Guard | None = None
        self._pool_owner: ApiClient = self

    def guarded(self, guard: Guard) -> ApiClient:
        """A view of this client that calls ``guard()`` immediately before sending any write.

        ``guard`` raises (``errors.NotLeader``) to refuse the write locally: the
        leader-election fence.  The view shares the connection pool; closing it
        closes nothing.
        """
        view = copy.copy(self)
        view._guard = guard
        return view

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection pool (a :meth:`guarded` view leaves it open)."""
        if self._pool_owner is not self:
            return
        if self._transport is not None:
            await self._transport.close()
            self._transport = None

    def _get_transport(self) -> transport.HttpTransport:
        if self._pool_owner is not self:
            return self._pool_owner._get_transport()
        if self._transport is None:
            context = self.credentials.ssl_context()
            self._transport = transport.HttpTransport(
                self.credentials.server,
                context if not isinstance(context, bool) else None,
                max_idle=self._max_idle,
                user_agent=self._user_agent,
            )
        return self._transport

    async def _headers(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        token = await self._tokens.token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if extra:
            headers.update(extra)
        return headers

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        headers: Mapping[str, str] | None = None,
        backoff: retry.Backoff | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Send one request (retrying transient failures) and return the decoded body."""
        policy = backoff or self.backoff
        data: bytes | None = None
        if body is not None:
            # JSON is YAML, so apply patches are sent as JSON too: PyYAML's pure-Python
            # emitter costs milliseconds per object, json.dumps microseconds.
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        all_headers = await self._headers(headers)
        if data is not None:
            all_headers["Content-Type"] = content_type
        attempt = 0
        while True:
            try:
                return await self._once(method, path, params, data, all_headers, timeout)
            except (errors.Unreachable, errors.ApiError) as exc:
                transient = isinstance(exc, errors.Unreachable) or (
                    isinstance(exc, errors.ApiError) and exc.retryable
                )
                attempt += 1
                if not transient or attempt >= policy.attempts:
                    raise
                delay = policy.delay(attempt - 1)
                log.debug("%s %s failed (%s); retry in %.2fs", method, path, exc, delay)
                await asyncio.sleep(delay)

    async def _once(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        data: bytes | None,
        headers: Mapping[str, str],
        timeout: float | None,
    ) -> Any:
        http = self._get_transport()
        if self._guard is not None and method in _WRITE_METHODS:
            # The fence.  With an idle pooled connection nothing yields to the event
            # loop between this check and the bytes being written to the socket.
            self._guard()
        try:
            async with asyncio.timeout(timeout or self.timeout):
                response = await http.request(
                    method, path, query=params, headers=headers, body=data
                )
        except (TimeoutError, OSError) as exc:
            raise errors.Unreachable(
                f"{self.credentials.server} unreachable ({method} {path}): "
                f"{exc.__class__.__name__}: {exc}"
            ) from exc
        decoded = _decode(response.body)
        if response.status >= 400:
            raise errors.from_status(response.status, decoded)
        return decoded

    # --- verbs ----------------------------------------------------------

    async def get(
        self, resource: resources.Resource, name: str, *, namespace: str | None = None,
        subresource: str | None = None,
    ) -> Object:
        """Read one object."""
        path = resource.path(name, namespace=namespace, subresource=subresource)
        result: Object = await self.request("GET", path)
        return result

    async def list(
        self,
        resource: resources.Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Object:
        """List objects; the result has ``items`` and ``metadata.resourceVersion``."""
        params: dict[str, str] = {}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        result: Object = await self.request(
            "GET", resource.path(namespace=namespace), params=params
        )
        return result

    async def table(self, resource: resources.Resource, *, namespace: str | None = None) -> Object:
        """List as a ``meta.k8s.io/v1 Table`` (what ``kubectl get`` prints)."""
        result: Object = await self.request(
            "GET", resource.path(namespace=namespace), headers={"Accept": TABLE_ACCEPT}
        )
        return result

    async def create(
        self, resource: resources.Resource, body: Mapping[str, Any], *,
        namespace: str | None = None,
    ) -> Object:
        """Create an object (not retried blindly: a retry could create twice)."""
        ns = namespace or body.get("metadata", {}).get("namespace")
        result: Object = await self.request(
            "POST", resource.path(namespace=ns), body=dict(body),
            backoff=retry.NO_RETRY,
        )
        return result

    async def update(
        self, resource: resources.Resource, body: Mapping[str, Any], *,
        subresource: str | None = None,
    ) -> Object:
        """Replace an object; guarded by ``metadata.resourceVersion`` when it is set."""
        meta = body.get("metadata", {})
        path = resource.path(
            meta["name"], namespace=meta.get("namespace"), subresource=subresource
        )
        result: Object = await self.request("PUT", path, body=dict(body))
        return result

    async def patch(
        self,
        resource: resources.Resource,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        patch_type: PatchType = "merge",
        field_manager: str | None = None,
        force: bool = False,
    ) -> Object:
        """Patch an object with a merge, JSON, strategic-merge or apply patch."""
        params: dict[str, str] = {}
        if field_manager:
            params["fieldManager"] = field_manager
        if force:
            params["force"] = "true"
        result: Object = await self.request(
            "PATCH",
            resource.path(name, namespace=namespace, subresource=subresource),
            params=params,
            body=patch,
            content_type=_PATCH_CONTENT_TYPES[patch_type],
        )
        return result

    async def apply(
        self,
        resource: resources.Resource,
        body: Mapping[str, Any],
        *,
        field_manager: str,
        subresource: str | None = None,
        force: bool = True,
    ) -> Object:
        """Server-side apply ``body`` as ``field_manager``.

        The server merges it and records the manager as the owner of exactly the
        fields in it (conditions are merged by ``type``).
        """
        meta = body.get("metadata", {})
        full = {"apiVersion": resource.api_version, "kind": resource.kind, **body}
        return await self.patch(
            resource, meta["name"], full, namespace=meta.get("namespace"),
            subresource=subresource, patch_type="apply", field_manager=field_manager,
            force=force,
        )

    async def delete(
        self, resource: resources.Resource, name: str, *, namespace: str | None = None,
        missing_ok: bool = False,
    ) -> Object | None:
        """Delete an object; with ``missing_ok`` a 404 is not an error."""
        try:
            result: Object = await self.request(
                "DELETE", resource.path(name, namespace=namespace)
            )
        except errors.NotFound:
            if missing_ok:
                return None
            raise
        return result

    async def watch(
        self,
        resource: resources.Resource,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[WatchEvent]:
        """Stream events until the server ends the watch (``timeout_seconds``).

        Raises :class:`~clusterhealth_core.kube.errors.Gone` when
        ``resource_version`` is too old; the caller relists.
        """
        params = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        if resource_version:
            params["resourceVersion"] = resource_version
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        http = self._get_transport()
        try:
            async with http.stream(
                "GET", resource.path(namespace=namespace), query=params,
                headers=await self._headers(None), timeout=self.timeout,
            ) as response:
                if response.status >= 400:
                    raise errors.from_status(response.status, _decode(await response.read_all()))
                async for line in response.lines(idle_timeout=timeout_seconds + 30):
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object", {})
                        raise errors.from_status(int(status.get("code", 500)), status)
                    yield WatchEvent(str(event["type"]), event["object"])
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            raise errors.Unreachable(
                f"{self.credentials.server}: watch of {resource.plural} broke: {exc}"
            ) from exc


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def names(items: Sequence[Mapping[str, Any]]) -> list[str]:
    """The ``metadata.name`` of each object, in order."""
    return [str(item["metadata"]["name"]) for item in items]
