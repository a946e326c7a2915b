"""What the kube client promises about retries, tokens, paging and watches.

Each test runs a small real HTTP server on loopback that misbehaves in one
precise way (a response cut after its status line, a 429 with Retry-After, a
401 for a stale token, a watch that goes silent) and counts what arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import pathlib
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

import testkit
from clusterhealth_core import retry
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config, errors, resources, transport
from clusterhealth_localenv import environment


@dataclasses.dataclass
class Request:
    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes
    at: float

    def header(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]


Respond = Callable[[Request, asyncio.StreamWriter], Awaitable[bool]]
"""Write the answer; return False to close the connection afterwards."""


async def _read(reader: asyncio.StreamReader) -> Request | None:
    line = await reader.readline()
    if not line:
        return None
    method, target, _ = line.decode().split(" ", 2)
    headers = []
    while (raw := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = raw.decode().partition(":")
        headers.append((name.strip(), value.strip()))
    length = int(next((v for k, v in headers if k.lower() == "content-length"), "0"))
    body = await reader.readexactly(length) if length else b""
    return Request(method, target, headers, body, time.monotonic())


@contextlib.asynccontextmanager
async def server(respond: Respond) -> AsyncIterator[tuple[str, list[Request]]]:
    seen: list[Request] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (request := await _read(reader)) is not None:
                seen.append(request)
                if not await respond(request, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async with testkit.loopback_server(handle) as url:
        yield url, seen


def reply(status: int, body: object, headers: dict[str, str] | None = None) -> bytes:
    data = json.dumps(body).encode()
    head = (f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n")
    head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    return head.encode() + b"\r\n" + data


FAST = retry.Backoff(initial=0.01, maximum=0.05, attempts=4)
LIBRARY: list[transport.Library] = ["httpx"]
"""The HTTP library of the clients this module's tests make (set per test)."""


library = testkit.each_http_library(LIBRARY)
"""Every promise holds on both HTTP libraries."""


def api_for(url: str, **kwargs: object) -> kube.ApiClient:
    return kube.ApiClient(config.Credentials(server=url, token="t"), backoff=FAST,
                          environ={}, http=LIBRARY[0], **kwargs)  # type: ignore[arg-type]


async def cut_after_status(request: Request, writer: asyncio.StreamWriter) -> bool:
    """The status line and headers arrive, the body never does: the request was processed."""
    writer.write(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 100\r\n\r\n{\"kind\":")
    await writer.drain()
    return False


async def test_a_create_whose_answer_was_cut_is_not_sent_again() -> None:
    async with server(cut_after_status) as (url, seen), api_for(url) as api:
        with pytest.raises(errors.Unreachable):
            await api.create(resources.CONFIGMAPS,
                             {"metadata": {"name": "a", "namespace": "default"}})
    assert [r.method for r in seen] == ["POST"]  # once: it may have been created


async def test_a_read_whose_answer_was_cut_is_sent_again() -> None:
    async def second_time_lucky(request: Request, writer: asyncio.StreamWriter) -> bool:
        if len(seen) == 1:
            return await cut_after_status(request, writer)
        writer.write(reply(200, {"metadata": {"name": "a"}}))
        return True

    async with server(second_time_lucky) as (url, seen), api_for(url) as api:
        obj = await api.get(resources.CONFIGMAPS, "a", namespace="default")
    assert obj["metadata"]["name"] == "a"
    assert [r.method for r in seen] == ["GET", "GET"]


async def test_apply_is_repeated_but_a_json_patch_is_not() -> None:
    async with server(cut_after_status) as (url, seen), api_for(url) as api:
        with pytest.raises(errors.Unreachable):
            await api.apply(resources.CONFIGMAPS, {"metadata": {"name": "a",
                                                               "namespace": "default"}},
                            field_manager="t")
        applied = len(seen)
        with pytest.raises(errors.Unreachable):
            await api.patch(resources.CONFIGMAPS, "a", [{"op": "add", "path": "/x",
                                                        "value": 1}],
                            namespace="default", patch_type="json")
    assert applied == FAST.attempts  # same result however often it lands
    assert len(seen) - applied == 1


async def test_a_create_refused_with_429_waits_retry_after_and_is_sent_again() -> None:
    async def throttled_once(request: Request, writer: asyncio.StreamWriter) -> bool:
        if len(seen) == 1:
            writer.write(reply(429, {"kind": "Status", "reason": "TooManyRequests",
                                     "message": "slow down"}, {"Retry-After": "1"}))
        else:
            writer.write(reply(201, {"metadata": {"name": "a"}}))
        return True

    async with server(throttled_once) as (url, seen), api_for(url) as api:
        await api.create(resources.CONFIGMAPS, {"metadata": {"name": "a",
                                                             "namespace": "default"}})
    assert [r.method for r in seen] == ["POST", "POST"]
    assert seen[1].at - seen[0].at >= 1.0  # Retry-After, not the 10 ms backoff


async def test_a_create_answered_503_is_not_sent_again() -> None:
    async def unavailable(request: Request, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(503, {"kind": "Status", "message": "etcd timeout"}))
        return True

    async with server(unavailable) as (url, seen), api_for(url) as api:
        with pytest.raises(errors.ApiError):
            await api.create(resources.CONFIGMAPS, {"metadata": {"name": "a",
                                                                 "namespace": "d"}})
        with pytest.raises(errors.ApiError):
            await api.get(resources.CONFIGMAPS, "a", namespace="d")
    assert [r.method for r in seen] == ["POST"] + ["GET"] * FAST.attempts


async def test_a_refused_connection_is_retried_even_for_a_create() -> None:
    async with server(cut_after_status) as (url, _):
        pass  # nothing listens there any more
    async with api_for(url) as api:
        with pytest.raises(errors.Unreachable) as caught:
            await api.create(resources.CONFIGMAPS, {"metadata": {"name": "a",
                                                                 "namespace": "d"}})
    assert caught.value.sent is False


async def test_401_rereads_the_token_file_once(tmp_path: pathlib.Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("old")

    async def only_new(request: Request, writer: asyncio.StreamWriter) -> bool:
        if request.header("Authorization") == ["Bearer new"]:
            writer.write(reply(200, {"metadata": {"name": "a"}}))
        else:
            writer.write(reply(401, {"kind": "Status", "reason": "Unauthorized",
                                     "message": "Unauthorized"}))
        return True

    async with server(only_new) as (url, seen):
        credentials = config.Credentials(server=url, token_file=token_file)
        async with kube.ApiClient(credentials, backoff=FAST, environ={}, http=LIBRARY[0]) as api:
            with pytest.raises(errors.Unauthorized):
                await api.get(resources.NAMESPACES, "a")  # the file still says "old"
            tries = len(seen)
            token_file.write_text("new")  # kubelet rotated it
            await api.get(resources.NAMESPACES, "a")
    assert tries == 2  # one retry after re-reading, then Unauthorized
    assert [r.header("Authorization") for r in seen[tries:]] == [["Bearer new"]]


async def test_a_static_token_gets_unauthorized_at_once() -> None:
    async def deny(request: Request, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(401, {"kind": "Status", "message": "Unauthorized"}))
        return True

    async with server(deny) as (url, seen), api_for(url) as api:
        with pytest.raises(errors.Unauthorized):
            await api.get(resources.NAMESPACES, "a")
    assert len(seen) == 1


async def test_impersonation_headers_one_per_group() -> None:
    async def ok(request: Request, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(200, {}))
        return True

    async with server(ok) as (url, seen):
        credentials = config.Credentials(server=url, token="t", impersonate_user="jane",
                                         impersonate_groups=("dev", "ops"))
        async with kube.ApiClient(credentials, environ={}, http=LIBRARY[0]) as api:
            await api.get(resources.NAMESPACES, "a")
    assert seen[0].header("Impersonate-User") == ["jane"]
    assert seen[0].header("Impersonate-Group") == ["dev", "ops"]


async def test_list_follows_continue_tokens() -> None:
    async def paged(request: Request, writer: asyncio.StreamWriter) -> bool:
        page = len(seen)
        more = {"continue": f"token{page}"} if page < 3 else {}
        writer.write(reply(200, {"kind": "List", "metadata": {"resourceVersion": "7", **more},
                                 "items": [{"metadata": {"name": f"n{page}"}}]}))
        return True

    async with server(paged) as (url, seen), api_for(url, page_size=1) as api:
        listing = await api.list(resources.NAMESPACES)
    assert kube.names(listing["items"]) == ["n1", "n2", "n3"]
    assert listing["metadata"] == {"resourceVersion": "7"}
    assert ["limit=1" in r.target for r in seen] == [True] * 3
    assert ["continue=token" in r.target for r in seen] == [False, True, True]


async def test_guarded_client_refuses_writes_and_allows_reads() -> None:
    async def ok(request: Request, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(200, {"metadata": {"name": "a"}}))
        return True

    leading = {"now": True}

    def fence() -> None:
        if not leading["now"]:
            raise errors.NotLeader("not the leader")

    async with server(ok) as (url, seen), api_for(url) as api:
        guarded = api.guarded(fence)
        await guarded.patch(resources.NAMESPACES, "a", {"x": 1})
        leading["now"] = False
        with pytest.raises(errors.NotLeader):
            await guarded.patch(resources.NAMESPACES, "a", {"x": 2})
        await guarded.get(resources.NAMESPACES, "a")
        await guarded.close()  # a view: the pool stays open for the owner
        await api.get(resources.NAMESPACES, "a")
    assert [r.method for r in seen] == ["PATCH", "GET", "GET"]


async def test_a_conditional_get_sends_the_tag_and_learns_not_modified() -> None:
    """``get_if_changed``: 304 has no body and keeps the tag; 200 is decoded with its new tag."""
    async def tagged(request: Request, writer: asyncio.StreamWriter) -> bool:
        if request.header("If-None-Match") == ['"v1"']:
            writer.write(b'HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\n\r\n')
        elif request.target == "/gone":
            writer.write(reply(404, {"kind": "Status", "code": 404, "reason": "NotFound"}))
        else:
            writer.write(reply(200, {"kind": "Doc", "n": len(seen)}, {"ETag": '"v2"'}))
        return True

    async with server(tagged) as (url, seen), api_for(url) as api:
        first = await api.get_if_changed("/doc", None, headers={"Accept": "x/y"})
        same = await api.get_if_changed("/doc", '"v1"')
        changed = await api.get_if_changed("/doc", '"v0"')
        with pytest.raises(errors.NotFound):
            await api.get_if_changed("/gone", '"v1x"')
    assert first == kube.Conditional(200, '"v2"', {"kind": "Doc", "n": 1})
    assert not first.not_modified
    assert same == kube.Conditional(304, '"v1"', None)
    assert same.not_modified
    assert changed == kube.Conditional(200, '"v2"', {"kind": "Doc", "n": 3})
    assert [r.header("If-None-Match") for r in seen] == [[], ['"v1"'], ['"v0"'], ['"v1x"']]
    assert seen[0].header("Accept") == ["x/y"]
    assert all(r.header("Authorization") == ["Bearer t"] for r in seen)


DISCOVERY = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


async def test_the_api_server_answers_a_conditional_discovery_read_with_304(
        env: environment.LocalEnvironment, library: transport.Library) -> None:
    """A real kube-apiserver tags aggregated discovery and honours ``If-None-Match``."""
    async with env.client("member1", http=library) as api:
        for path in ("/api", "/apis"):
            first = await api.get_if_changed(path, None, headers={"Accept": DISCOVERY})
            assert first.status == 200
            assert first.body["kind"] == "APIGroupDiscoveryList"
            assert first.etag and first.etag.startswith('"')
            again = await api.get_if_changed(path, first.etag, headers={"Accept": DISCOVERY})
            assert again == kube.Conditional(304, first.etag, None)
            other = await api.get_if_changed(path, '"other"', headers={"Accept": DISCOVERY})
            assert other.status == 200
            assert other.etag == first.etag
            assert other.body == first.body


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def test_a_silent_watch_is_broken_off() -> None:
    async def silent(request: Request, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(_chunk(b'{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n'))
        await writer.drain()
        await asyncio.sleep(30)  # then nothing, with the connection open
        return False

    async with server(silent) as (url, _), api_for(url) as api:
        seen: list[str] = []

        async def follow() -> None:
            async for event in api.watch(resources.NAMESPACES, timeout_seconds=1,
                                         idle_margin=0.5):
                seen.append(event.type)

        with pytest.raises(errors.Unreachable, match="broke"):
            await follow()
    assert seen == ["ADDED"]


async def test_a_watch_line_that_is_not_json_is_a_protocol_error() -> None:
    async def garbage(request: Request, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(_chunk(b'{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n'))
        writer.write(_chunk(b"<html>proxy error</html>\n"))
        writer.write(b"0\r\n\r\n")
        return True

    async with server(garbage) as (url, _), api_for(url) as api:
        with pytest.raises(errors.ProtocolError, match="not a watch event"):
            async for _event in api.watch(resources.NAMESPACES):
                pass


async def test_connections_probe_dead_peers_with_tcp_keepalive(
        env: environment.LocalEnvironment, library: transport.Library) -> None:
    """Every pooled connection to the API server has keepalive probes armed."""
    async with env.client(http=library) as cp:
        await _keepalive_armed(cp)


async def _keepalive_armed(cp: kube.ApiClient) -> None:
    await cp.list(resources.NAMESPACES)
    port = cp.credentials.server.rsplit(":", 1)[1]
    shown = (await asyncio.to_thread(
        subprocess.run, ["ss", "-tnopH", "state", "established", f"( dport = :{port} )"],
        capture_output=True, text=True, check=True)).stdout
    ours = [line for line in shown.splitlines() if f"pid={os.getpid()}," in line]
    assert ours, f"no connection of this process to the API server seen:\n{shown}"
    assert all("timer:(keepalive" in line for line in ours), shown
