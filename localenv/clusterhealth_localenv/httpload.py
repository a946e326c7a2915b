"""Real HTTP backends and a steady HTTP load on loopback, for tests, demo and benchmarks.

- :class:`Backend`: an asyncio HTTP/1.1 server answering with its own name
  (header ``X-Backend``), keep-alive, counting requests and in-flight ones;
  ``?delay=<s>`` (or its default ``delay``) makes a request slow, so requests
  are in flight at the moment a cluster is blocked.
- :class:`Client`: one keep-alive HTTP/1.1 connection.
- :class:`Traffic`: N clients sending requests back to back (some slow),
  recording which backend answered when, and every failure (a connection
  error, a timeout, or any status but 200 from a backend).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import time
import urllib.parse


class Backend:
    """An HTTP server on 127.0.0.1 answering its name (header ``X-Backend: <name>``)."""

    def __init__(self, name: str, cluster: str, delay: float = 0.0) -> None:
        self.name = name
        self.cluster = cluster
        self.delay = delay
        self.port = 0
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.connections = 0
        self.paths: list[str] = []
        self.arrivals: list[float] = []
        """``time.monotonic()`` when each request arrived."""
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self, host: str = "127.0.0.1", port: int = 0, *,
                    sock: socket.socket | None = None) -> Backend:
        """Listen on ``host:port`` (default: a free port of 127.0.0.1), or serve ``sock``.

        ``sock`` is a listening socket made elsewhere (e.g. in another network namespace).
        """
        if sock is not None:
            self._server = await asyncio.start_server(self._serve, sock=sock)
        else:
            self._server = await asyncio.start_server(self._serve, host, port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def close(self) -> None:
        """Stop serving and close the open connections."""
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):
                writer.close()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2.0):
                    await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                target = lines[0].split(" ")[1]
                headers = {k.strip().lower(): v.strip() for k, _, v in
                           (line.partition(":") for line in lines[1:] if line)}
                length = int(headers.get("content-length", "0"))
                if length:
                    await reader.readexactly(length)
                url = urllib.parse.urlsplit(target)
                query = urllib.parse.parse_qs(url.query)
                delay = float(query["delay"][0]) if "delay" in query else self.delay
                self.requests += 1
                self.arrivals.append(time.monotonic())
                self.paths.append(url.path)
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                try:
                    if delay:
                        await asyncio.sleep(delay)
                finally:
                    self.in_flight -= 1
                body = f"{self.name}\n".encode()
                close = headers.get("connection", "").lower() == "close"
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                    + f"X-Backend: {self.name}\r\nContent-Length: {len(body)}\r\n".encode()
                    + (b"Connection: close\r\n" if close else b"")
                    + b"\r\n" + body)
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, IndexError, ValueError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()


@dataclasses.dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: str

    @property
    def backend(self) -> str | None:
        return self.headers.get("x-backend")


class Client:
    """One keep-alive connection to the load balancer (reopened only when the server closed it)."""

    def __init__(self, port: int, timeout: float = 10.0, address: str = "127.0.0.1") -> None:
        self.port = port
        self.timeout = timeout
        self.address = address
        self.connections = 0
        self._stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def get(self, host: str | None, path: str) -> Response:
        async with asyncio.timeout(self.timeout):
            return await self._get(host, path)

    async def _get(self, host: str | None, path: str) -> Response:
        if self._stream is None:
            self._stream = await asyncio.open_connection(self.address, self.port)
            self.connections += 1
        reader, writer = self._stream
        try:
            request = f"GET {path} HTTP/1.1\r\n" + (f"Host: {host}\r\n" if host else "") + "\r\n"
            writer.write(request.encode())
            await writer.drain()
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            status = int(head[0].split(" ")[1])
            headers = {k.strip().lower(): v.strip() for k, _, v in
                       (line.partition(":") for line in head[1:] if line)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
        except BaseException:
            await self.close()
            raise
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return Response(status, headers, body.decode())

    async def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream[1].close()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1.0):
                    await stream[1].wait_closed()


async def get(port: int, host: str | None, path: str, timeout: float = 10.0) -> Response:
    """One request on a fresh connection."""
    client = Client(port, timeout)
    try:
        return await client.get(host, path)
    finally:
        await client.close()


@dataclasses.dataclass
class Traffic:
    """``clients`` keep-alive clients sending requests back to back until stopped.

    Every ``slow_every``-th request of a client asks its backend for a
    ``slow_delay`` response, so requests are in flight at any moment.
    """

    port: int
    host: str | None
    path: str
    clients: int = 4
    slow_every: int = 5
    slow_delay: float = 0.3
    pause: float = 0.002
    address: str = "127.0.0.1"
    """Where the load balancer listens (with ``port``)."""
    answers: list[tuple[float, str]] = dataclasses.field(default_factory=list)
    """``(monotonic time the request was sent, backend)`` per successful request."""
    failures: list[str] = dataclasses.field(default_factory=list)
    failed_at: list[float] = dataclasses.field(default_factory=list)
    """``time.monotonic()`` when each failed request was sent (beside ``failures``)."""
    _tasks: list[asyncio.Task[None]] = dataclasses.field(default_factory=list)
    _stopping: bool = False

    def start(self) -> None:
        self._tasks = [asyncio.get_running_loop().create_task(self._run(i))
                       for i in range(self.clients)]

    async def stop(self) -> None:
        self._stopping = True
        async with asyncio.timeout(30.0):
            await asyncio.gather(*self._tasks)

    def count(self, backend: str, since: float = 0.0) -> int:
        return sum(1 for t, b in self.answers if b == backend and t >= since)

    def last_sent(self, backend: str) -> float | None:
        times = [t for t, b in self.answers if b == backend]
        return max(times) if times else None

    async def wait_for(self, total: int, timeout: float = 20.0) -> None:
        """Until ``total`` more answers arrived (bounded)."""
        target = len(self.answers) + total
        deadline = time.monotonic() + timeout
        while len(self.answers) < target:
            if time.monotonic() > deadline:
                raise AssertionError(f"traffic stalled: {len(self.answers)}/{target} answers, "
                                     f"failures {self.failures[:5]}")
            await asyncio.sleep(0.01)

    async def _run(self, number: int) -> None:
        client = Client(self.port, address=self.address)
        sent = 0
        try:
            while not self._stopping:
                sent += 1
                slow = self.slow_every and sent % self.slow_every == number % self.slow_every
                path = f"{self.path}?delay={self.slow_delay}" if slow else self.path
                started = time.monotonic()
                try:
                    response = await client.get(self.host, path)
                except Exception as exc:
                    self.failures.append(f"client {number}: {type(exc).__name__}: {exc}")
                    self.failed_at.append(started)
                    continue
                if response.status != 200 or response.backend is None:
                    self.failures.append(f"client {number}: HTTP {response.status} "
                                         f"{response.body.strip()!r}")
                    self.failed_at.append(started)
                else:
                    self.answers.append((started, response.backend))
                await asyncio.sleep(self.pause)
        finally:
            await client.close()


async def serve(name: str, host: str, port: int, delay: float = 0.0) -> None:
    """Run one :class:`Backend` on ``host:port`` until cancelled."""
    backend = await Backend(name, "", delay).start(host, port)
    print(f"serving {name} on {host}:{port}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await backend.close()


def main(argv: list[str] | None = None) -> int:
    """``python -m clusterhealth_localenv.httpload --name N --bind IP --port P``."""
    import argparse
    import signal

    parser = argparse.ArgumentParser(prog="clusterhealth-httpload")
    parser.add_argument("--name", required=True)
    parser.add_argument("--bind", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args(argv)

    async def run() -> None:
        task = asyncio.create_task(serve(args.name, args.bind, args.port, args.delay))
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
