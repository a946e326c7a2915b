"""The health/metrics server against real sockets: dual-stack bind, TLS with rotation, limits."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import pathlib
import socket
import ssl
from collections.abc import AsyncIterator
from typing import Any

import prometheus_client
import pytest
from cryptography import x509
from prometheus_client import metrics_core

import testkit
from clusterhealth_core import clock as clocks
from clusterhealth_core import runner, serving, settings
from clusterhealth_localenv import pki

Response = tuple[int, dict[str, str], bytes]


class SteppedClock(clocks.Clock):
    """Monotonic time that moves only when the test says so."""

    def __init__(self) -> None:
        self.t = 1000.0

    def monotonic(self) -> float:
        return self.t


@contextlib.asynccontextmanager
async def running(**kwargs: Any) -> AsyncIterator[serving.HealthServer]:
    registry = kwargs.pop("registry", None) or prometheus_client.CollectorRegistry()
    server = serving.HealthServer(registry, port=kwargs.pop("port", 0), **kwargs)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def exchange(host: str, port: int, raw: bytes, *,
                   tls: ssl.SSLContext | None = None) -> Response:
    """Send ``raw``, read to EOF, parse status, headers and body."""
    async with asyncio.timeout(10):
        reader, writer = await asyncio.open_connection(
            host, port, ssl=tls, server_hostname="localhost" if tls else None)
        try:
            writer.write(raw)
            await writer.drain()
            data = await reader.read()
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
    return parse(data)


def parse(data: bytes) -> Response:
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


async def get(host: str, port: int, path: str, *, method: str = "GET",
              tls: ssl.SSLContext | None = None) -> Response:
    return await exchange(host, port, f"{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
                          tls=tls)


# --- where it listens ---------------------------------------------------------


def test_this_host_has_ipv6_loopback() -> None:
    # the dual-stack tests below rely on ::1; fail loudly (never skip) if it is missing
    with socket.socket(socket.AF_INET6) as probe:
        probe.bind(("::1", 0))


async def test_default_bind_serves_ipv4_and_ipv6_clients() -> None:
    registry = prometheus_client.CollectorRegistry()
    assert serving.HealthServer(registry).host == "::"
    async with running() as server:
        assert server.addresses == [("::", server.bound_port)]
        for host in ("127.0.0.1", "::1"):
            status, _, body = await get(host, server.bound_port, "/healthz")
            assert (status, body) == (200, b"ok\n")


async def test_default_bind_falls_back_to_ipv4_without_ipv6(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    real = socket.socket

    def no_ipv6(family: int = socket.AF_INET, *args: Any, **kwargs: Any) -> socket.socket:
        if family == socket.AF_INET6:
            raise OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol")
        return real(family, *args, **kwargs)

    monkeypatch.setattr(socket, "socket", no_ipv6)
    caplog.set_level(logging.WARNING, logger=serving.__name__)
    async with running() as server:
        assert server.addresses == [("0.0.0.0", server.bound_port)]
        assert "no IPv6 on this host" in caplog.text
        monkeypatch.undo()
        assert (await get("127.0.0.1", server.bound_port, "/healthz"))[0] == 200


async def test_port_in_use_is_an_error_not_a_fallback() -> None:
    # IPv6 only: an IPv4 fallback on the same port would succeed, and must not happen
    with socket.socket(socket.AF_INET6) as taken:
        taken.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        taken.bind(("::", 0))
        taken.listen()
        server = serving.HealthServer(prometheus_client.CollectorRegistry(),
                                      port=taken.getsockname()[1])
        with pytest.raises(OSError, match="in use"):
            await server.start()
        assert server.addresses == []


@pytest.mark.parametrize(("host", "other"), [("127.0.0.1", "::1"), ("::1", "127.0.0.1")])
async def test_explicit_address_is_bound_exactly(host: str, other: str) -> None:
    async with running(host=host) as server:
        assert server.addresses == [(host, server.bound_port)]
        assert (await get(host, server.bound_port, "/healthz"))[0] == 200
        with pytest.raises(ConnectionRefusedError):
            await get(other, server.bound_port, "/healthz")


async def test_host_name_binds_each_address_on_one_port() -> None:
    async with running(host="localhost") as server:
        resolved = {str(info[4][0]) for info in socket.getaddrinfo(
            "localhost", None, type=socket.SOCK_STREAM)}
        assert {a for a, _ in server.addresses} == resolved
        assert {p for _, p in server.addresses} == {server.bound_port}
        for address in resolved:
            assert (await get(address, server.bound_port, "/healthz"))[0] == 200


# --- what it answers ------------------------------------------------------------


async def test_metrics_serve_the_injected_registry_only() -> None:
    registry = prometheus_client.CollectorRegistry()
    prometheus_client.Counter("demo_events", "events", registry=registry).inc(3)
    async with running(registry=registry) as server:
        status, headers, body = await get("::1", server.bound_port, "/metrics")
    assert status == 200
    assert headers["content-type"] == prometheus_client.CONTENT_TYPE_LATEST
    assert b"demo_events_total 3.0" in body
    assert b"python_gc" not in body and b"process_" not in body  # not the global registry
    assert headers["connection"] == "close"
    assert int(headers["content-length"]) == len(body)


async def test_health_checks() -> None:
    ready = {"value": False}
    async with running() as server:
        server.add_liveness("loop", lambda: (True, "running"))
        server.add_readiness("synced", lambda: (ready["value"], "informer synced"))
        port = server.bound_port
        assert (await get("127.0.0.1", port, "/healthz"))[0] == 200
        status, _, body = await get("127.0.0.1", port, "/readyz")
        assert status == 503 and b"[-]synced failed: informer synced" in body
        ready["value"] = True
        status, _, body = await get("127.0.0.1", port, "/readyz?verbose")
        assert status == 200 and b"[+]synced ok" in body
        assert (await get("127.0.0.1", port, "/nope"))[0] == 404


async def test_only_get_and_head() -> None:
    async with running() as server:
        port = server.bound_port
        for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
            status, headers, _ = await get("127.0.0.1", port, "/healthz", method=method)
            assert status == 405, method
            assert headers["allow"] == "GET, HEAD"
        status, headers, body = await get("127.0.0.1", port, "/healthz", method="HEAD")
        assert (status, body) == (200, b"")
        assert headers["content-length"] == "3"


@pytest.mark.parametrize(("raw", "status"), [
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET /healthz\r\n\r\n", 400),
    (b"GET http://[::1/healthz HTTP/1.1\r\n\r\n", 400),
    (b"GET /healthz HTTP/2.0\r\n\r\n", 505),
    (b"GET /healthz HTTP/1.0\r\n\r\n", 200),
    (b"\r\nGET /healthz HTTP/1.1\nHost: x\n\n", 200),
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\n", 400),  # cut short: EOF before the blank line
])
async def test_malformed_requests(raw: bytes, status: int) -> None:
    async with running() as server:
        async with asyncio.timeout(10):
            reader, writer = await asyncio.open_connection("127.0.0.1", server.bound_port)
            writer.write(raw)
            if not raw.endswith(b"\n\n"):
                writer.write_eof()
            data = await reader.read()
            writer.close()
        assert parse(data)[0] == status


async def test_a_failing_collector_is_a_500_and_the_server_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    class Broken(prometheus_client.registry.Collector):
        def collect(self) -> Any:
            raise RuntimeError("boom")

    registry = prometheus_client.CollectorRegistry()
    registry.register(Broken())
    async with running(registry=registry) as server:
        assert (await get("127.0.0.1", server.bound_port, "/metrics"))[0] == 500
        assert "boom" in caplog.text
        assert (await get("127.0.0.1", server.bound_port, "/healthz"))[0] == 200


# --- limits ---------------------------------------------------------------------


async def test_headers_are_capped() -> None:
    async with running(limits=serving.Limits(max_header_bytes=1024)) as server:
        port = server.bound_port
        fits = b"GET /healthz HTTP/1.1\r\nX-Pad: " + b"a" * 900 + b"\r\n\r\n"
        assert (await exchange("127.0.0.1", port, fits))[0] == 200
        long_line = b"GET /healthz HTTP/1.1\r\nX-Pad: " + b"a" * 2000 + b"\r\n\r\n"
        assert (await exchange("127.0.0.1", port, long_line))[0] == 431
        many = b"GET /healthz HTTP/1.1\r\n" + b"X-Pad: aaaaaaaaaaaaaaaaaaaa\r\n" * 60 + b"\r\n"
        assert (await exchange("127.0.0.1", port, many))[0] == 431
        long_target = b"GET /" + b"a" * 4000 + b" HTTP/1.1\r\n\r\n"
        assert (await exchange("127.0.0.1", port, long_target))[0] == 431


class _Big:
    """A collector whose exposition (12 MB) is larger than the socket buffers: answering
    it blocks while the client does not read."""

    def collect(self) -> Any:
        yield metrics_core.GaugeMetricFamily("big", "pad " * 3_000_000, value=1)


SLOW_CLIENT = ("127.0.0.2", 0)
"""Where the slow clients connect from (the prompt ones from 127.0.0.1)."""


async def test_a_new_connection_takes_the_place_of_one_still_waiting_for_its_head() -> None:
    async with running(limits=serving.Limits(max_connections=2)) as server:
        port = server.bound_port
        held = [await asyncio.open_connection("127.0.0.1", port, local_addr=SLOW_CLIENT)
                for _ in range(2)]
        await testkit.eventually(lambda: server.active_connections == 2, timeout=10, interval=0.01)
        # another one from the same address is closed at once: it holds as many as any
        async with asyncio.timeout(10):
            reader, writer = await asyncio.open_connection("127.0.0.1", port,
                                                           local_addr=SLOW_CLIENT)
            writer.write(b"GET /healthz HTTP/1.1\r\n\r\n")
            with contextlib.suppress(ConnectionResetError):
                assert await reader.read() == b""
            writer.close()
        assert (server.rejected, server.evicted) == (1, 0)
        # one from another address is answered; the oldest silent connection is closed for it
        assert (await get("127.0.0.1", port, "/healthz"))[0] == 200
        assert (server.rejected, server.evicted) == (1, 1)
        async with asyncio.timeout(10):
            with contextlib.suppress(ConnectionResetError):
                assert await held[0][0].read() == b""
        # the other one is still served
        held[1][1].write(b"GET /healthz HTTP/1.1\r\n\r\n")
        async with asyncio.timeout(10):
            assert parse(await held[1][0].read())[0] == 200
        for _, writer in held:
            writer.close()
        await testkit.eventually(lambda: server.active_connections == 0, timeout=10, interval=0.01)


async def test_excess_connections_are_closed_at_once_when_every_one_is_being_answered() -> None:
    registry = prometheus_client.CollectorRegistry()
    registry.register(_Big())
    async with running(registry=registry, limits=serving.Limits(max_connections=2)) as server:
        port = server.bound_port
        busy = []
        for _ in range(2):  # each asks for /metrics and never reads: its answer is stuck
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /metrics HTTP/1.1\r\n\r\n")
            busy.append((reader, writer))
        await testkit.eventually(lambda: server.active_connections == 2 and not server._heading,
                                 timeout=10, interval=0.01)
        async with asyncio.timeout(10):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /healthz HTTP/1.1\r\n\r\n")
            with contextlib.suppress(ConnectionResetError):
                assert await reader.read() == b""  # closed without a response
            writer.close()
        assert server.rejected == 1 and server.evicted == 0
        for _, writer in busy:
            writer.transport.abort()
        await testkit.eventually(lambda: server.active_connections == 0, timeout=10, interval=0.01)
        assert (await get("127.0.0.1", port, "/healthz"))[0] == 200


async def _slowloris(port: int, stop: asyncio.Event, dropped: list[float]) -> None:
    """Connect (from :data:`SLOW_CLIENT`), send a request line, then a header byte every
    0.2 s; when dropped, connect again at once."""
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port,
                                                           local_addr=SLOW_CLIENT)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        started = asyncio.get_running_loop().time()
        try:
            writer.write(b"GET /healthz HTTP/1.1\r\nX-Slow: ")
            while not stop.is_set() and not reader.at_eof():
                writer.write(b"a")
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.2):
                        if await reader.read(1) == b"":
                            break
            else:
                continue
            dropped.append(asyncio.get_running_loop().time() - started)
        except OSError:
            dropped.append(asyncio.get_running_loop().time() - started)
        finally:
            writer.transport.abort()


async def test_slow_clients_cannot_starve_the_probes() -> None:
    """Slowloris: three times more connections than slots, each trickling a header byte and
    coming back at once when dropped; a prompt client from another address (kubelet's probe,
    from the node) is still answered at once, every time, and the slow ones are dropped."""
    limits = serving.Limits(max_connections=4, header_timeout=0.5, request_timeout=30)
    async with running(limits=limits) as server:
        port = server.bound_port
        stop = asyncio.Event()
        dropped: list[float] = []
        slow = [asyncio.create_task(_slowloris(port, stop, dropped)) for _ in range(12)]
        try:
            await testkit.eventually(lambda: server.active_connections == 4, timeout=10,
                                     interval=0.01)
            answered = []
            for _ in range(15):
                async with asyncio.timeout(2):  # a kubelet probe's patience, generously
                    answered.append((await get("127.0.0.1", port, "/healthz"))[0])
                await asyncio.sleep(0.1)
            assert answered == [200] * 15
            await testkit.eventually(lambda: len(dropped) >= 12, timeout=10, interval=0.01)
        finally:
            stop.set()
            await asyncio.gather(*slow)
        # every slow connection was closed by the server, long before the request deadline
        assert max(dropped) < limits.request_timeout / 3
        assert server.slow + server.evicted >= 12
        await testkit.eventually(lambda: server.active_connections == 0, timeout=10, interval=0.01)


async def test_a_lone_slow_client_is_dropped_after_the_header_timeout() -> None:
    limits = serving.Limits(header_timeout=0.5, request_timeout=30)
    async with running(limits=limits) as server:
        stop = asyncio.Event()
        dropped: list[float] = []
        task = asyncio.create_task(_slowloris(server.bound_port, stop, dropped))
        try:
            await testkit.eventually(lambda: bool(dropped), timeout=10, interval=0.01)
        finally:
            stop.set()
            await task
        assert server.slow >= 1 and server.evicted == 0
        assert 0.4 < dropped[0] < limits.request_timeout / 3


async def test_a_silent_client_is_disconnected_and_frees_its_slot() -> None:
    limits = serving.Limits(max_connections=1, request_timeout=0.3)
    async with running(limits=limits) as server:
        async with asyncio.timeout(10):
            reader, writer = await asyncio.open_connection("127.0.0.1", server.bound_port)
            writer.write(b"GET /healthz HTTP/1.1\r\n")  # and never the end of the headers
            assert await reader.read() == b""
            writer.close()
        await testkit.eventually(lambda: server.active_connections == 0, timeout=10, interval=0.01)
        assert (await get("127.0.0.1", server.bound_port, "/healthz"))[0] == 200


# --- TLS ------------------------------------------------------------------------


def issue(ca: pki.CertificateAuthority) -> pki.KeyPair:
    return ca.serving("clusterhealth-test", ["127.0.0.1", "::1"], ["localhost"])


def trusting(ca: pki.CertificateAuthority) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=ca.cert_pem.decode())
    return context


async def served_certificate(port: int, ca: pki.CertificateAuthority,
                             host: str = "127.0.0.1") -> x509.Certificate:
    async with asyncio.timeout(10):
        reader, writer = await asyncio.open_connection(host, port, ssl=trusting(ca),
                                                       server_hostname="localhost")
        try:
            der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
            writer.write(b"GET /healthz HTTP/1.1\r\n\r\n")
            assert parse(await reader.read())[:1] == (200,)
        finally:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()
    return x509.load_der_x509_certificate(der)


def serial(pair: pki.KeyPair) -> int:
    return x509.load_pem_x509_certificate(pair.cert_pem).serial_number


async def test_tls_serves_both_families(tmp_path: pathlib.Path) -> None:
    ca = pki.CertificateAuthority()
    volume = pki.SecretVolume(tmp_path)
    first = issue(ca)
    volume.write(first)
    async with running(tls=serving.TLSConfig(volume.cert, volume.key)) as server:
        for host in ("127.0.0.1", "::1"):
            cert = await served_certificate(server.bound_port, ca, host)
            assert cert.serial_number == serial(first)
        status, _, body = await get("::1", server.bound_port, "/readyz", tls=trusting(ca))
        assert (status, body) == (200, b"ok\n")
        # a client speaking plain HTTP to the TLS port gets nothing, and the server goes on
        async with asyncio.timeout(10):
            reader, writer = await asyncio.open_connection("127.0.0.1", server.bound_port)
            writer.write(b"GET /healthz HTTP/1.1\r\n\r\n")
            with contextlib.suppress(ConnectionResetError):
                assert b"200 OK" not in await reader.read()
            writer.close()
        await testkit.eventually(lambda: server.active_connections == 0, timeout=10, interval=0.01)
        assert (await served_certificate(server.bound_port, ca)).serial_number == serial(first)


async def test_tls_certificate_rotation_without_restart(
        tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    ca = pki.CertificateAuthority()
    volume = pki.SecretVolume(tmp_path)
    first, second, third = issue(ca), issue(ca), issue(ca)
    volume.write(first)
    clock = SteppedClock()
    tls = serving.TLSConfig(volume.cert, volume.key, reload_interval=30.0)
    async with running(tls=tls, clock=clock) as server:
        port = server.bound_port
        assert (await served_certificate(port, ca)).serial_number == serial(first)
        # a connection made before the rotation keeps its certificate and is served
        early_reader, early_writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=trusting(ca), server_hostname="localhost")

        volume.write(second)
        clock.t += 10  # within the interval: the files are not looked at yet
        assert (await served_certificate(port, ca)).serial_number == serial(first)
        clock.t += 20
        assert (await served_certificate(port, ca)).serial_number == serial(second)
        assert (await served_certificate(port, ca, "::1")).serial_number == serial(second)

        early_writer.write(b"GET /healthz HTTP/1.1\r\n\r\n")
        async with asyncio.timeout(10):
            assert parse(await early_reader.read())[0] == 200
        early_writer.close()

        # a broken rotation (key of another certificate) keeps the working certificate
        volume.write(third, key_pem=first.key_pem)
        clock.t += 30
        assert (await served_certificate(port, ca)).serial_number == serial(second)
        assert "keeping the current TLS certificate" in caplog.text
        assert "do not match" in caplog.text
        # ... until the pair is whole again
        volume.write(third)
        clock.t += 30
        assert (await served_certificate(port, ca)).serial_number == serial(third)
        assert server._certificates is not None and server._certificates.reloads == 2


# --- flags ----------------------------------------------------------------------


def _parser() -> settings.FlagParser:
    parser = settings.FlagParser(prog="test", env_prefix="CH")
    settings.add_serving_flags(parser, 10358)
    return parser


def test_serving_flag_defaults() -> None:
    args = _parser().parse([], environ={})
    assert args.bind_address == "::"
    assert settings.tls_config_from(args) is None


def test_tls_flags(tmp_path: pathlib.Path) -> None:
    ca = pki.CertificateAuthority()
    cert, key = issue(ca).write(tmp_path, "good")
    _, other_key = issue(ca).write(tmp_path, "other")
    args = _parser().parse([f"--tls-cert-file={cert}"],
                           environ={"CH_TLS_PRIVATE_KEY_FILE": str(key)})
    assert settings.tls_config_from(args) == serving.TLSConfig(str(cert), str(key))
    bad = [
        ([f"--tls-cert-file={cert}"], "--tls-private-key-file is missing"),
        ([f"--tls-private-key-file={key}"], "--tls-cert-file is missing"),
        ([f"--tls-cert-file={tmp_path / 'nope.crt'}", f"--tls-private-key-file={key}"],
         "cannot read TLS certificate .*nope.crt"),
        ([f"--tls-cert-file={cert}", f"--tls-private-key-file={other_key}"], "do not match"),
        ([f"--tls-cert-file={key}", f"--tls-private-key-file={key}"], "cannot use"),
    ]
    for argv, message in bad:
        with pytest.raises(settings.SettingsError, match=message):
            settings.tls_config_from(_parser().parse(argv, environ={}))


def test_bad_tls_files_exit_2_at_start(tmp_path: pathlib.Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    ca = pki.CertificateAuthority()
    cert, _ = issue(ca).write(tmp_path, "a")
    _, key = issue(ca).write(tmp_path, "b")

    def load(argv: Any) -> serving.TLSConfig | None:
        return settings.tls_config_from(_parser().parse(argv, environ={}))

    async def serve(_: object) -> None:
        raise AssertionError("must not start")

    code = runner.main("test", load, serve,
                       [f"--tls-cert-file={cert}", f"--tls-private-key-file={key}"])
    assert code == 2
    assert "do not match" in capsys.readouterr().err
