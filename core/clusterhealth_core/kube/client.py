"""An asyncio client for the Kubernetes API, small enough for a DaemonSet.

It speaks JSON over :mod:`~clusterhealth_core.kube.transport` (httpx) and
knows nothing about particular kinds beyond
:class:`~clusterhealth_core.kube.resources.Resource`.

What it promises its callers:

* a request is sent again only when that is safe: it never reached the
  server, or repeating it cannot do something twice (``GET``, ``PUT``,
  ``DELETE``, server-side apply, merge patches), or the server refused it
  unprocessed (429, honouring ``Retry-After``);
* a 401 drops the cached token (an ``exec`` plugin runs again, a token file
  is re-read) and, when a fresh token can differ, the request is tried once
  more; otherwise :class:`~clusterhealth_core.kube.errors.Unauthorized`;
* lists are paged (``limit`` + ``continue``); no read of a body waits
  longer than the read timeout, and no call (its attempts, its waits, the
  whole body) longer than :attr:`Limits.request_timeout`
  (:class:`~clusterhealth_core.kube.errors.DeadlineExceeded`);
* a response body or a watch line past its cap is
  :class:`~clusterhealth_core.kube.errors.TooLarge`; a list page too large
  for the cap is asked for again with half as many objects;
* with :attr:`Limits.max_in_flight`, at most that many requests to the
  server at once; a request waits for a free slot, unless the requests
  holding them have been stuck for :attr:`Limits.stall_after` seconds
  (:class:`~clusterhealth_core.kube.errors.Saturated`): a hung server holds
  that many callers, not all of them; health checks (``probe=True``) have a
  slot of their own, as the API server's priority and fairness exempts its
  ``probes`` flow: busy writes never make a member look down;
* watches end by themselves (``timeoutSeconds``) so that an idle stream is
  bounded, and a broken stream is a typed error the caller resumes from;
  they take no slot and have no overall deadline;
* a client made with :meth:`ApiClient.guarded`, or given a ``guard``, asks
  the guard before every write: the leader-election fence.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Literal

from clusterhealth_core import retry
from clusterhealth_core.kube import config, errors, jsoncodec, proxies, resources, transport

log = logging.getLogger(__name__)

PatchType = Literal["merge", "json", "strategic", "apply"]
_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}
# Patches whose second application changes nothing: safe to send again.
_IDEMPOTENT_PATCHES = frozenset({"merge", "strategic", "apply"})
_IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
_WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
DEFAULT_PAGE_SIZE = 500
DEFAULT_WATCH_SECONDS = 45
"""The server ends every watch after this long (then the caller resumes it)."""
WATCH_IDLE_MARGIN = 15.0
"""A watch silent for ``timeoutSeconds`` plus this long is dead."""
MAX_RETRY_AFTER = 60.0
DEFAULT_REQUEST_TIMEOUT = 60.0
"""No call to an API server takes longer (client-go has none by default; Karmada gives its
member clients 32 s)."""
PROBE_SLOTS = 1
"""With ``Limits.max_in_flight``: health checks sent to the server at once, apart from the
other requests (one probe is due at a time; a stuck one makes the next ``Saturated``)."""
NOT_MODIFIED = 304
Object = dict[str, Any]
Guard = Callable[[], None]


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one API server may cost the process: time, bytes, concurrency."""

    request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT
    """Seconds one call may take in all: waiting for a slot, every attempt, every retry pause,
    the whole body (watches excepted).  None: no deadline."""
    max_response_bytes: int = transport.MAX_RESPONSE_BYTES
    """Largest response body read."""
    max_watch_line_bytes: int = transport.MAX_LINE_BYTES
    """Longest watch event read."""
    max_in_flight: int | None = None
    """Requests (not watches) sent to the server at once; None: no limit."""
    stall_after: float = 10.0
    """With ``max_in_flight``: a request waiting for a slot gives up once the oldest request
    holding one has been in flight this long (the server is stuck, not busy)."""

    def __post_init__(self) -> None:
        if self.request_timeout is not None and self.request_timeout <= 0:
            raise ValueError(f"request timeout must be > 0, not {self.request_timeout}")
        if self.max_response_bytes < 1 or self.max_watch_line_bytes < 1:
            raise ValueError("response and watch line caps must be at least 1 byte")
        if self.max_in_flight is not None and self.max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, not {self.max_in_flight}")
        if self.stall_after <= 0:
            raise ValueError(f"stall_after must be > 0, not {self.stall_after}")


@dataclasses.dataclass(frozen=True)
class Conditional:
    """The answer to :meth:`ApiClient.get_if_changed`."""

    status: int
    """200 (or another 2xx/3xx the server chose), or 304 when the document still had the tag."""
    etag: str | None
    """The document's entity tag as the server sent it (quotes included); None: untagged."""
    body: Any
    """The decoded document; None on 304."""

    @property
    def not_modified(self) -> bool:
        """Whether the server answered 304: the document is the one the tag was sent for."""
        return self.status == NOT_MODIFIED


@dataclasses.dataclass(frozen=True)
class _Call:
    """One call as each of its attempts sends it."""

    method: str
    path: str
    params: Mapping[str, str] | None
    data: bytes | None
    headers: Mapping[str, str]
    """The caller's headers (``Accept``, ``Content-Type``, ``If-None-Match``)."""
    timeout: float | None
    """Each read's timeout (None: the client's)."""


class InFlight:
    """The requests in flight to one server and the slots they hold (``max_in_flight``)."""

    def __init__(self, limit: int | None, stall_after: float) -> None:
        self.limit = limit
        self.stall_after = stall_after
        self.started: dict[int, float] = {}
        """Request number -> when it took its slot (event loop time)."""
        self.streams = 0
        """Watch streams open (they hold no slot)."""
        self._next = 0
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def busy(self) -> bool:
        """Whether any request or stream is in flight."""
        return bool(self.started) or self.streams > 0

    async def acquire(self, until: float | None) -> int:
        """A slot; raises :class:`Stalled` (with the oldest request's age) when none frees in time.

        ``until`` is the caller's deadline (event loop time); reaching it while
        waiting raises ``TimeoutError``.
        """
        loop = asyncio.get_running_loop()
        while self.limit is not None and len(self.started) >= self.limit:
            now = loop.time()
            oldest = min(self.started.values())
            stalled = oldest + self.stall_after
            if now >= stalled:
                raise Stalled(now - oldest)
            if until is not None and now >= until:
                raise TimeoutError
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout_at(stalled if until is None else min(stalled, until)):
                    await waiter
            except TimeoutError:
                pass  # checked again above
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake()  # woken and cancelled at once: the next waiter gets the slot
                raise
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        self._next += 1
        self.started[self._next] = loop.time()
        return self._next

    def release(self, number: int) -> None:
        """Free the slot of request ``number``; the first waiter takes it."""
        self.started.pop(number, None)
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.pop(0)
            if not waiter.done():
                waiter.set_result(None)
                return


class Stalled(Exception):
    """No slot freed: the oldest request holding one is ``age`` seconds old."""

    def __init__(self, age: float) -> None:
        super().__init__(f"stalled for {age:.1f}s")
        self.age = age


class WatchEvent:
    """One event of a watch stream: ``ADDED``, ``MODIFIED``, ``DELETED`` or ``BOOKMARK``."""

    __slots__ = ("object", "type")

    def __init__(self, type_: str, obj: Object) -> None:
        self.type = type_
        self.object = obj

    def __repr__(self) -> str:
        name = self.object.get("metadata", {}).get("name")
        return f"WatchEvent({self.type}, {name})"


@dataclasses.dataclass
class _Pool:
    """What every view of one client shares: the connections and the token."""

    credentials: config.Credentials
    tokens: config.TokenSource
    make_transport: Callable[[], transport.Transport]
    on_unauthorized: Callable[[], None] | None
    in_flight: InFlight
    probes: InFlight
    """The health checks' own slot (``request(probe=True)``)."""
    connections: transport.Transport | None = None
    sealed: str = ""
    """Why the client may no longer be used (a replaced member client); "" while it may."""

    def http(self) -> transport.Transport:
        if self.sealed:
            raise errors.ClientClosed(self.sealed)
        if self.connections is None:
            self.connections = self.make_transport()
        return self.connections


def proxy_for(credentials: config.Credentials,
              environ: Mapping[str, str] | None = None) -> transport.Proxy | None:
    """The proxy for ``credentials``' server: its own, else the environment's."""
    if credentials.proxy_url:
        url = proxies.check_proxy_url(credentials.proxy_url)
        return transport.Proxy(url, credentials.proxy_headers)
    found = proxies.from_environment(credentials.server,
                                     os.environ if environ is None else environ)
    return transport.Proxy(proxies.check_proxy_url(found)) if found else None


class ApiClient:
    """A connection pool to one API server with the credentials to use it."""

    def __init__(
        self,
        credentials: config.Credentials,
        *,
        timeout: float = 10.0,
        backoff: retry.Backoff = retry.DEFAULT,
        user_agent: str = "clusterhealth",
        max_connections: int | None = 16,
        http: transport.Library = "httpx",
        page_size: int = DEFAULT_PAGE_SIZE,
        on_unauthorized: Callable[[], None] | None = None,
        environ: Mapping[str, str] | None = None,
        limits: Limits = Limits(),
        name: str | None = None,
        guard: Guard | None = None,
    ) -> None:
        self.credentials = credentials
        self.timeout = timeout
        self.backoff = backoff
        self.page_size = page_size
        self.limits = limits
        self.name = f"{name} ({credentials.server})" if name else credentials.server
        """How errors name the server: ``cluster member1 (https://...)`` for a member."""
        try:
            proxy = proxy_for(credentials, environ)
        except proxies.ProxyConfigError as exc:
            raise errors.ConfigError(f"{credentials.source}: {exc}") from exc

        if http not in transport.LIBRARIES:
            raise ValueError(f"unknown HTTP library {http!r}: one of {transport.LIBRARIES}")

        def make_transport() -> transport.Transport:
            context = credentials.ssl_context()
            tls = context if not isinstance(context, bool) else None
            if http == "aiohttp":  # imported only by processes that choose it
                from clusterhealth_core.kube import aiohttp_transport
                return aiohttp_transport.AiohttpTransport(
                    credentials.server, tls, proxy=proxy, max_connections=max_connections,
                    connect_timeout=timeout, user_agent=user_agent,
                    max_response_bytes=limits.max_response_bytes,
                    max_line_bytes=limits.max_watch_line_bytes)
            return transport.HttpTransport(
                credentials.server, tls, proxy=proxy, max_connections=max_connections,
                connect_timeout=timeout, user_agent=user_agent,
                max_response_bytes=limits.max_response_bytes,
                max_line_bytes=limits.max_watch_line_bytes)

        self._pool = _Pool(credentials, config.TokenSource(credentials), make_transport,
                           on_unauthorized, InFlight(limits.max_in_flight, limits.stall_after),
                           InFlight(None if limits.max_in_flight is None else PROBE_SLOTS,
                                    limits.stall_after))
        self._guard: Guard | None = guard
        self._owner = True

    @property
    def proxy(self) -> transport.Proxy | None:
        """The proxy connections go through, if any."""
        return self._pool.http().proxy

    @property
    def guard(self) -> Guard | None:
        """What this client asks before every write (the leader-election fence), if anything."""
        return self._guard

    @property
    def busy(self) -> bool:
        """Whether a request or a watch is in flight through this client's connections."""
        return self._pool.in_flight.busy or self._pool.probes.busy

    @property
    def closed(self) -> bool:
        """Whether :meth:`seal` was called (no request may start any more)."""
        return bool(self._pool.sealed)

    def seal(self, why: str) -> None:
        """Refuse every later request and watch with ``why`` (:class:`errors.ClientClosed`).

        For a client that was replaced (a member's rotated credentials, a
        deleted Cluster): a caller that still holds it fails at once instead
        of reopening connections; what is in flight finishes.
        """
        self._pool.sealed = why or "client closed"

    def guarded(self, guard: Guard) -> ApiClient:
        """A view of this client that calls ``guard()`` before sending any write.

        ``guard`` raises (``errors.NotLeader``) to refuse the write locally.
        The view shares the connection pool; closing it closes nothing.
        """
        view = object.__new__(ApiClient)
        view.__dict__.update(self.__dict__)
        view._guard = guard
        view._owner = False
        return view

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection pool (a :meth:`guarded` view leaves it open)."""
        if self._owner and self._pool.connections is not None:
            await self._pool.connections.close()
            self._pool.connections = None

    async def _headers(self, extra: Mapping[str, str] | None
                       ) -> tuple[list[tuple[str, str]], str | None]:
        """The request's headers, and the bearer token in them (to invalidate on 401)."""
        headers = [("Accept", "application/json")]
        token = await self._pool.tokens.token()
        if token:
            headers.append(("Authorization", f"Bearer {token}"))
        creds = self.credentials
        if creds.impersonate_user:
            headers.append(("Impersonate-User", creds.impersonate_user))
        headers += [("Impersonate-Group", group) for group in creds.impersonate_groups]
        if extra:
            headers = [(k, v) for k, v in headers if k.lower() not in
                       {e.lower() for e in extra}] + list(extra.items())
        return headers, token

    def _unauthorized(self, token: str | None) -> None:
        self._pool.tokens.invalidate(token)
        if self._pool.on_unauthorized is not None:
            self._pool.on_unauthorized()

    def _check_guard(self, method: str) -> None:
        if self._guard is not None and method in _WRITE_METHODS:
            self._guard()

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
        idempotent: bool | None = None,
        probe: bool = False,
    ) -> Any:
        """Send one request, retrying only what is safe, and return the decoded body.

        ``timeout`` bounds each read of the response (not the whole body); the
        whole call, retries included, is bounded by :attr:`Limits.request_timeout`.
        ``idempotent`` overrides the method's default (GET/PUT/DELETE yes,
        POST/PATCH no) for deciding whether a request that may have reached
        the server can be sent again.  ``probe`` sends a health check through
        its own slot, so that requests filling :attr:`Limits.max_in_flight`
        neither delay it nor make it fail as ``Saturated``.
        """
        policy = backoff or self.backoff
        repeatable = method in _IDEMPOTENT_METHODS if idempotent is None else idempotent
        data: bytes | None = None
        if body is not None:
            # JSON is YAML, so apply patches are sent as JSON too: PyYAML's pure-Python
            # emitter costs milliseconds per object, JSON microseconds.
            data = body.encode() if isinstance(body, str) else jsoncodec.dumps(body)
        extra = dict(headers or {})
        if data is not None:
            extra["Content-Type"] = content_type
        response = await self._exchange(_Call(method, path, params, data, extra, timeout),
                                        policy, repeatable, probe)
        return _decode(response.body)

    async def get_if_changed(
        self,
        path: str,
        etag: str | None,
        *,
        headers: Mapping[str, str] | None = None,
        backoff: retry.Backoff | None = None,
        timeout: float | None = None,
    ) -> Conditional:
        """``GET path`` unless it still has the entity tag ``etag`` (``If-None-Match``).

        For documents the server tags, such as aggregated discovery: with the
        tag of the last answer, an unchanged document is a ``304 Not Modified``
        without a body (:attr:`Conditional.not_modified`), so the caller reuses
        what it made of the last one.  ``etag`` None: an ordinary read.  Errors,
        retries and limits as :meth:`request`.
        """
        extra = dict(headers or {})
        if etag is not None:
            extra["If-None-Match"] = etag
        response = await self._exchange(_Call("GET", path, None, None, extra, timeout),
                                        backoff or self.backoff, True, False)
        tag = response.headers.get("etag")
        if response.status == NOT_MODIFIED:
            return Conditional(NOT_MODIFIED, tag or etag, None)
        return Conditional(response.status, tag, _decode(response.body))

    async def _exchange(self, call: _Call, policy: retry.Backoff, repeatable: bool,
                        probe: bool) -> transport.Response:
        """One call's attempts (see :meth:`request`); the answer, an error for >= 400."""
        loop = asyncio.get_running_loop()
        limit = self.limits.request_timeout
        until = None if limit is None else loop.time() + limit
        attempt = 0
        refreshed = False
        last: errors.KubeError
        while True:
            delay: float | None = None
            try:
                return await self._once(call, until,
                                        self._pool.probes if probe else self._pool.in_flight)
            except errors.Unauthorized as exc:
                self._unauthorized(exc.token)
                if refreshed or not self._pool.tokens.refreshable:
                    raise
                refreshed = True
                continue
            except (errors.DeadlineExceeded, errors.Saturated, errors.ClientClosed):
                raise  # the server is slow (another attempt would only wait longer), or retired
            except errors.Unreachable as exc:
                if (exc.sent and not repeatable) or attempt + 1 >= policy.attempts:
                    raise
                last = exc
            except errors.ApiError as exc:
                if exc.status == 429:
                    delay = _retry_after(exc)
                elif not (exc.retryable and repeatable):
                    raise
                if attempt + 1 >= policy.attempts:
                    raise
                last = exc
            attempt += 1
            pause = max(policy.delay(attempt - 1), delay or 0.0)
            if until is not None and loop.time() + pause >= until:
                raise last  # no time left for another attempt
            log.debug("%s %s failed; retry %d in %.2fs", call.method, call.path, attempt, pause)
            await asyncio.sleep(pause)

    def _deadline_error(self, method: str, path: str) -> errors.DeadlineExceeded:
        return errors.DeadlineExceeded(
            f"{self.name}: {method} {path}: no complete answer within the "
            f"{self.limits.request_timeout:g}s request deadline", sent=True)

    async def _once(self, call: _Call, until: float | None, in_flight: InFlight
                    ) -> transport.Response:
        method, path = call.method, call.path
        headers, token = await self._headers(call.headers)
        try:
            slot = await in_flight.acquire(until)
        except Stalled as exc:
            raise errors.Saturated(
                f"{self.name}: {method} {path} not sent: {in_flight.limit} requests to it are "
                f"in flight, the oldest for {exc.age:.0f}s (limit: {in_flight.limit} at once; "
                "it answers too slowly)", sent=False) from None
        except TimeoutError:
            raise errors.DeadlineExceeded(
                f"{self.name}: {method} {path} not sent: no slot freed within the "
                f"{self.limits.request_timeout:g}s request deadline ({in_flight.limit} requests "
                "to it at once)", sent=False) from None
        try:
            remaining = None if until is None else until - asyncio.get_running_loop().time()
            if remaining is not None and remaining <= 0:
                raise self._deadline_error(method, path)
            http = self._pool.http()
            self._check_guard(method)  # the last step before sending: the token may have taken time
            response = await http.request(
                method, path, query=call.params, headers=headers, body=call.data,
                read_timeout=call.timeout or self.timeout, deadline=remaining,
            )
        except transport.DeadlineExceeded as exc:
            raise self._deadline_error(method, path) from exc
        except transport.TooLarge as exc:
            raise errors.TooLarge(
                f"{self.name}: {method} {path}: the response is larger than "
                f"{transport.describe_size(exc.limit)} (the response size limit)",
                limit=exc.limit) from exc
        except transport.TransportError as exc:
            raise errors.Unreachable(
                f"{self.name} unreachable ({method} {path}): {exc}", sent=exc.sent,
            ) from exc
        finally:
            in_flight.release(slot)
        if response.status >= 400:
            error = errors.from_status(response.status, _decode(response.body),
                                       response.headers)
            if isinstance(error, errors.Unauthorized):
                error.token = token
            raise error
        return response

    # --- verbs ----------------------------------------------------------

    async def get(
        self, resource: resources.Resource, name: str, *, namespace: str | None = None,
        subresource: str | None = None,
    ) -> Object:
        """Read one object."""
        path = resource.path(name, namespace=namespace, subresource=subresource)
        result: Object = await self.request("GET", path)
        return result

    async def list_pages(
        self,
        resource: resources.Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[Object]:
        """Yield the list one page (``limit`` objects, default ``page_size``) at a time.

        Every page has ``items`` and ``metadata``; all pages come from one
        consistent snapshot whose ``resourceVersion`` is on each page.  An
        expired ``continue`` token raises :class:`~errors.Gone` (list again).
        """
        params: dict[str, str] = {"limit": str(limit or self.page_size)}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        path = resource.path(namespace=namespace)
        while True:
            try:
                page: Object = await self.request("GET", path, params=params)
            except errors.TooLarge:
                fewer = int(params["limit"]) // 2
                if fewer < 1:
                    raise
                log.warning("%s: a page of %s %s is too large; asking for %d at a time",
                            self.name, params["limit"], resource.plural, fewer)
                params["limit"] = str(fewer)
                continue
            yield page
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return
            params["continue"] = str(token)

    async def list(
        self,
        resource: resources.Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Object:
        """List every object (paged underneath); the result has ``items`` and ``metadata``."""
        items: list[Object] = []
        last: Object = {}
        async for page in self.list_pages(resource, namespace=namespace,
                                          label_selector=label_selector,
                                          field_selector=field_selector):
            items.extend(page.get("items") or [])
            last = page
        metadata = dict(last.get("metadata") or {})
        metadata.pop("continue", None)
        metadata.pop("remainingItemCount", None)
        return {**last, "metadata": metadata, "items": items}

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
        """Create an object (sent again only if it certainly never reached the server)."""
        ns = namespace or body.get("metadata", {}).get("namespace")
        result: Object = await self.request(
            "POST", resource.path(namespace=ns), body=dict(body),
        )
        return result

    async def update(
        self, resource: resources.Resource, body: Mapping[str, Any], *,
        subresource: str | None = None, field_manager: str | None = None,
    ) -> Object:
        """Replace an object; guarded by ``metadata.resourceVersion`` when it is set.

        ``field_manager``: the name ``managedFields`` records for what changed
        (without it, the server derives one from the User-Agent).
        """
        meta = body.get("metadata", {})
        path = resource.path(
            meta["name"], namespace=meta.get("namespace"), subresource=subresource
        )
        params = {"fieldManager": field_manager} if field_manager else None
        result: Object = await self.request("PUT", path, body=dict(body), params=params)
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
            idempotent=patch_type in _IDEMPOTENT_PATCHES,
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
        timeout_seconds: int = DEFAULT_WATCH_SECONDS,
        idle_margin: float = WATCH_IDLE_MARGIN,
    ) -> AsyncIterator[WatchEvent]:
        """Stream events until the server ends the watch after ``timeout_seconds``.

        The server ends a healthy stream by then (bookmarks are asked for, but
        API servers send them only as their cache's version moves), so a
        stream silent for ``timeout_seconds + idle_margin`` is dead (a peer
        that still acknowledges TCP but answers nothing) and raises
        :class:`~errors.Unreachable`.  A
        ``resource_version`` too old raises :class:`~errors.Gone` (relist);
        anything unparsable raises :class:`~errors.ProtocolError`.
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
        what = f"{self.name}: watch of {resource.plural}"
        headers, token = await self._headers(None)
        in_flight = self._pool.in_flight
        in_flight.streams += 1
        try:
            async with self._pool.http().stream(
                "GET", resource.path(namespace=namespace), query=params, headers=headers,
                idle_timeout=timeout_seconds + idle_margin,
            ) as response:
                if response.status >= 400:
                    error = errors.from_status(response.status,
                                               _decode(await response.read_all()),
                                               response.headers)
                    if isinstance(error, errors.Unauthorized):
                        self._unauthorized(token)
                    raise error
                async for line in response.lines():
                    if not line.strip():
                        continue
                    yield _watch_event(line, what)
        except transport.TooLarge as exc:
            raise errors.TooLarge(
                f"{what}: an event larger than {transport.describe_size(exc.limit)} (the watch "
                "event size limit)", limit=exc.limit) from exc
        except (transport.TransportError, TimeoutError) as exc:
            raise errors.Unreachable(f"{what} broke: {exc}", sent=True) from exc
        finally:
            in_flight.streams -= 1


def _watch_event(line: str, what: str) -> WatchEvent:
    try:
        event = jsoncodec.loads(line)
        type_ = str(event["type"])
        obj = event["object"]
    except (ValueError, KeyError, TypeError) as exc:
        raise errors.ProtocolError(f"{what}: not a watch event: {line[:200]!r}") from exc
    if not isinstance(obj, dict):
        raise errors.ProtocolError(f"{what}: event object is not an object: {line[:200]!r}")
    if type_ == "ERROR":
        raise errors.from_status(int(obj.get("code", 500)), obj)
    return WatchEvent(type_, obj)


def _retry_after(exc: errors.ApiError) -> float | None:
    value = exc.headers.get("retry-after") if exc.headers else None
    if value is None:
        return None
    try:
        return min(MAX_RETRY_AFTER, max(0.0, float(value)))
    except ValueError:
        return None  # an HTTP date: rare from API servers; use the backoff


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return jsoncodec.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def names(items: Sequence[Mapping[str, Any]]) -> list[str]:
    """The ``metadata.name`` of each object, in order."""
    return [str(item["metadata"]["name"]) for item in items]
