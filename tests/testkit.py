"""The helpers every kind of test shares: unique names, waiting, a Cluster object.

Before this module each kit (and some test modules) wrote these again; one
copy here keeps them alike.  ``tests/`` is on the path of every test (pytest
puts the folder of ``tests/conftest.py`` there), so any test says
``import testkit``.  The polling itself is the harness's
(:func:`clusterhealth_localenv.waiting.eventually`, shared with the
benchmarks); this sets the suite's defaults.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources, transport
from clusterhealth_localenv import waiting

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

UNREACHABLE = "https://127.0.0.1:1"
"""The API endpoint of a Cluster that no test ever reaches."""


def unique(prefix: str) -> str:
    """``prefix`` and six random hex digits: a name no other test (or run) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


async def eventually(check: Callable[[], Awaitable[T | None] | T | None],
                     timeout: float = 60.0, what: str = "condition", *,
                     interval: float = 0.2,
                     not_yet: tuple[type[Exception], ...] = (errors.KubeError,),
                     process: waiting.Watched | None = None) -> T:
    """``check()``'s first truthy result (plain or async check); fail after ``timeout``.

    ``what`` names the awaited state in the failure; an API error counts as
    "not yet" unless ``not_yet`` narrows it; with ``process``, fail at once
    when it exits, quoting its log.
    """
    result: T = await waiting.eventually(check, timeout=timeout, interval=interval, what=what,
                                         not_yet=not_yet, process=process)
    return result


def cluster_object(name: str, taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A Push-mode Cluster whose API endpoint is unreachable, with ``taints`` if any."""
    spec: dict[str, Any] = {"apiEndpoint": UNREACHABLE, "syncMode": "Push"}
    if taints:
        spec["taints"] = list(taints)
    return {"apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
            "metadata": {"name": name}, "spec": spec}


async def make_cluster(cp: kube.ApiClient, name: str,
                       taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Create :func:`cluster_object` on the control plane ``cp``; the object created."""
    created: dict[str, Any] = await cp.create(resources.CLUSTERS, cluster_object(name, taints))
    return created


class PartitionableClient(kube.ApiClient):
    """A client cut off from its server at the test's word: while ``partitioned``, every
    request fails as if the network were down (the server itself stays up)."""

    partitioned = False

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        if self.partitioned:
            raise errors.Unreachable("injected partition")
        return await super().request(method, path, **kwargs)


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
"""One connection's handler for :func:`loopback_server`."""


@contextlib.asynccontextmanager
async def loopback_server(handler: Handler) -> AsyncIterator[str]:
    """``http://127.0.0.1:<port>`` of a small real TCP server running ``handler`` per
    connection, closed on exit."""
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        await server.wait_closed()


async def read_head(reader: asyncio.StreamReader) -> bytes:
    """An HTTP request's line and headers, up to the blank line (less if the peer hangs up)."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = await reader.readline()
        if not line:
            break
        head += line
    return head


def fake_time(test: F) -> F:
    """Run the async ``test`` on fake time (``looptime``), on an event loop of its own.

    For code that waits only on the loop's clock (an injected :class:`clocks.Clock`, queue
    delays, timeouts): its sleeps and "nothing more happens" waits pass at once, exactly.
    Its own loop, because the session's loop runs other tests' background tasks and fake
    time moves only when the loop is idle.  Not for tests doing real I/O: time jumps while
    an answer is on its way.
    """
    marked: F = pytest.mark.looptime(pytest.mark.asyncio(loop_scope="function")(test))
    return marked


def stop_process(proc: subprocess.Popen[Any], sig: int = signal.SIGTERM,
                 timeout: float = 15) -> None:
    """Send ``sig`` to ``proc`` if it still runs; kill it if it has not exited in ``timeout``."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def each_http_library(current: list[transport.Library]) -> Any:
    """An autouse fixture that runs each test of a module once per HTTP library, with
    ``current[0]`` set to it for the module's clients (``library = each_http_library(X)``)."""
    @pytest.fixture(autouse=True, params=transport.LIBRARIES)
    def library(request: pytest.FixtureRequest) -> Iterator[transport.Library]:
        current[0] = request.param
        yield request.param
        current[0] = "httpx"

    return library
