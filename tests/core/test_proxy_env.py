"""The local tinyproxy runs, tunnels CONNECTs and logs them: the witness for the proxy tests."""

from __future__ import annotations

import base64
import pathlib
import socket
import ssl
import threading
import time
from collections.abc import Iterator

import pytest

from clusterhealth_localenv import environment, proxy


@pytest.fixture
def echo_server() -> Iterator[tuple[str, int]]:
    """A loopback TCP server that answers each connection with 'hello' (the tunnel's far end)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(b"hello")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield "127.0.0.1", int(listener.getsockname()[1])
    stop.set()
    thread.join()
    listener.close()


def _connect(tiny: proxy.TinyProxy, target: str,
             headers: dict[str, str] | None = None) -> tuple[socket.socket, bytes]:
    sock = socket.create_connection((tiny.host, tiny.port), timeout=5)
    request = f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n"
    for name, value in (headers or {}).items():
        request += f"{name}: {value}\r\n"
    sock.sendall((request + "\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            break
        head += chunk
    return sock, head


def _wait_for(check: object, timeout: float = 5.0) -> None:
    assert callable(check)
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "tinyproxy's log never showed it"
        time.sleep(0.02)


def test_tunnels_and_logs_a_connect(tmp_path: pathlib.Path,
                                    echo_server: tuple[str, int]) -> None:
    host, port = echo_server
    target = f"{host}:{port}"
    with proxy.TinyProxy(tmp_path, connect_ports=[port]) as tiny:
        assert tiny.running
        assert tiny.connect_targets() == []
        sock, head = _connect(tiny, target)
        with sock:
            assert head.startswith(b"HTTP/1.0 200"), head
            assert sock.recv(5) == b"hello"  # the bytes came through the tunnel
        _wait_for(lambda: tiny.connect_targets() == [target])
        assert tiny.established_hosts() == [host]

        # A port that is not allowed is refused (403) but still logged as asked for.
        sock, head = _connect(tiny, f"{host}:1")
        sock.close()
        assert b" 403 " in head.split(b"\r\n")[0], head
        _wait_for(lambda: tiny.connect_targets() == [target, f"{host}:1"])
        assert tiny.established_hosts() == [host]
    assert not tiny.running


def test_basic_auth_demands_the_proxy_authorization_header(
    tmp_path: pathlib.Path, echo_server: tuple[str, int]
) -> None:
    target = f"{echo_server[0]}:{echo_server[1]}"
    with proxy.TinyProxy(tmp_path, basic_auth=("probe", "s3cret")) as tiny:
        assert tiny.proxy_authorization == "Basic " + base64.b64encode(b"probe:s3cret").decode()
        sock, head = _connect(tiny, target)
        sock.close()
        assert b" 407 " in head.split(b"\r\n")[0], head
        sock, head = _connect(tiny, target,
                              {"Proxy-Authorization": str(tiny.proxy_authorization)})
        with sock:
            assert head.startswith(b"HTTP/1.0 200"), head
            assert sock.recv(5) == b"hello"
        _wait_for(lambda: len(tiny.connect_targets()) == 2)
        assert len(tiny.established_hosts()) == 1


def test_restart_keeps_address_and_log(tmp_path: pathlib.Path,
                                       echo_server: tuple[str, int]) -> None:
    target = f"{echo_server[0]}:{echo_server[1]}"
    tiny = proxy.TinyProxy(tmp_path)
    with tiny:
        _connect(tiny, target)[0].close()
        tiny.restart()
        assert tiny.running
        _connect(tiny, target)[0].close()
        _wait_for(lambda: tiny.connect_targets() == [target, target])


def test_refuses_a_non_loopback_address(tmp_path: pathlib.Path) -> None:
    with pytest.raises(proxy.ProxyError, match="loopback"):
        proxy.TinyProxy(tmp_path, host="192.0.2.1")


async def test_https_to_the_api_server_through_the_proxy(
    env: environment.LocalEnvironment, tmp_path: pathlib.Path
) -> None:
    """A raw CONNECT, then TLS and GET /version to the real API server inside the tunnel."""
    server = env.servers[environment.CONTROL_PLANE]
    tiny = proxy.TinyProxy(tmp_path, connect_ports=[server.port])
    async with tiny:
        target = f"{server.host}:{server.port}"
        sock, head = _connect(tiny, target)
        assert head.startswith(b"HTTP/1.0 200"), head
        context = ssl.create_default_context(cadata=env.ca.cert_pem.decode())
        with context.wrap_socket(sock, server_hostname=server.host) as tls:
            tls.sendall(f"GET /version HTTP/1.1\r\nHost: {target}\r\n"
                        f"Authorization: Bearer {server.token}\r\n"
                        "Connection: close\r\n\r\n".encode())
            answer = b""
            while chunk := tls.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        assert b'"gitVersion"' in answer
        _wait_for(lambda: tiny.connect_targets() == [target])
