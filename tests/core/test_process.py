"""The base every component's process settings extend, and the one ``serve()`` that runs them."""

from __future__ import annotations

import asyncio
import dataclasses
import pathlib
from typing import Any

import pytest

from clusterhealth_core import process, runner, serving, settings
from clusterhealth_localenv import pki

ALL = settings.ProcessFlags(prog="all", description="every common flag",
                            healthz_port=10400, lease="all-lease", http_library="library",
                            event_namespace="namespace")
BARE = settings.ProcessFlags(prog="bare", description="serving only",
                             healthz_port=10401, kube=())
TWO = dataclasses.replace(ALL, kube=(settings.CONTROL_PLANE, ("karmada-", "the other")))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Own(settings.ProcessSettings):
    """A component's settings: one field read from its flag, one given."""

    resync_period: float
    given: str = "unset"


def _own(parser: settings.FlagParser) -> None:
    parser.add_argument("--resync-period", type=settings.duration, default=300.0)


def _load(flags: settings.ProcessFlags, argv: list[str], environ: dict[str, str] | None = None,
          **own: Any) -> Own:
    environ = {} if environ is None else environ
    args = settings.process_parser(flags, _own).parse(argv, environ)
    return settings.read_process(Own, flags, args, environ, **own)


@pytest.fixture
def kubeconfig(tmp_path: pathlib.Path) -> str:
    ca = pki.CertificateAuthority()
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(ca.cert_pem)
    cert, key = ca.client("someone").write(tmp_path, "client")
    pki.write_kubeconfig(tmp_path / "kubeconfig", "c", "https://127.0.0.1:1", ca_file, cert, key)
    return str(tmp_path / "kubeconfig")


@pytest.mark.parametrize(("flags", "expected"), [
    (ALL, {"healthz_port": 10400, "leader_elect": True, "http_library": "aiohttp",
           "event_namespace": "default", "tls": None, "bind_address": "::",
           "resync_period": 300.0, "given": "unset"}),
    (BARE, {"credentials": None, "healthz_port": 10401, "leader_elect": False, "election": None,
            "http_library": "httpx", "event_namespace": "default", "tls": None}),
])
def test_defaults_read_back(flags: settings.ProcessFlags, expected: dict[str, Any],
                            kubeconfig: str) -> None:
    loaded = _load(flags, ["--kubeconfig", kubeconfig] if flags.kube else [])
    assert {name: getattr(loaded, name) for name in expected} == expected
    if flags.lease:
        assert loaded.election is not None
        assert (loaded.election.lease_name, loaded.election.lease_namespace) == (
            "all-lease", "kube-system")
        assert loaded.credentials is not None
        assert loaded.credentials.server == "https://127.0.0.1:1"


@pytest.mark.parametrize(("argv", "environ", "expected"), [
    (["--healthz-port", "9000", "--bind-address", "127.0.0.1"], {},
     {"healthz_port": 9000, "bind_address": "127.0.0.1"}),
    ([], {"ALL_HEALTHZ_PORT": "9001", "ALL_RESYNC_PERIOD": "1m"},
     {"healthz_port": 9001, "resync_period": 60.0}),
    (["--healthz-port", "9002"], {"ALL_HEALTHZ_PORT": "9001"}, {"healthz_port": 9002}),
    (["--leader-elect=false", "--http-library", "httpx", "--event-namespace", "kube-system"],
     {}, {"leader_elect": False, "http_library": "httpx", "event_namespace": "kube-system"}),
    ([], {"ALL_LEADER_ELECT": "false", "ALL_EVENT_NAMESPACE": "kube-system"},
     {"leader_elect": False, "event_namespace": "kube-system"}),
])
def test_flags_and_environment(argv: list[str], environ: dict[str, str],
                               expected: dict[str, Any], kubeconfig: str) -> None:
    loaded = _load(ALL, ["--kubeconfig", kubeconfig, *argv], environ)
    assert {name: getattr(loaded, name) for name in expected} == expected


def test_the_lease_namespace_is_the_pods(kubeconfig: str) -> None:
    loaded = _load(ALL, ["--kubeconfig", kubeconfig], {"POD_NAMESPACE": "mine"})
    assert loaded.election is not None
    assert loaded.election.lease_namespace == "mine"


def test_own_fields_given_win_over_flags(kubeconfig: str) -> None:
    loaded = _load(ALL, ["--kubeconfig", kubeconfig, "--resync-period", "5s"],
                   resync_period=7.0, given="yes")
    assert (loaded.resync_period, loaded.given) == (7.0, "yes")


@pytest.mark.parametrize(("flags", "argv", "message"), [
    (ALL, ["--event-namespace", "clusterhealth-system"], "--event-namespace: .*default or "
                                                          "kube-system"),
    (ALL, ["--tls-cert-file", "/nonexistent.pem"], "--tls-private-key-file is missing"),
    (ALL, ["--leader-elect-renew-deadline", "20s"], "lease duration"),
    (ALL, ["--healthz-port", "70000"], "not a port"),
    (ALL, ["--http-library", "requests"], "--http-library"),
    (BARE, ["--leader-elect=false"], "unrecognized arguments"),
    (BARE, ["--kubeconfig", "x"], "unrecognized arguments"),
    (BARE, ["--http-library", "httpx"], "unrecognized arguments"),
    (BARE, ["--event-namespace", "default"], "unrecognized arguments"),
])
def test_bad_values_are_one_clear_error(flags: settings.ProcessFlags, argv: list[str],
                                        message: str, kubeconfig: str) -> None:
    base = ["--kubeconfig", kubeconfig] if flags.kube else []
    with pytest.raises(settings.SettingsError, match=message):
        _load(flags, [*base, *argv])


def test_an_unreadable_kubeconfig_of_the_first_pair(tmp_path: pathlib.Path) -> None:
    with pytest.raises(settings.SettingsError, match="cannot read kubeconfig"):
        _load(TWO, ["--kubeconfig", str(tmp_path / "missing"),
                    "--karmada-kubeconfig", str(tmp_path / "not-read-by-the-base")])


def test_help_lists_the_common_flags_around_the_own() -> None:
    text = settings.process_parser(TWO, _own).format_help()
    order = ["--kubeconfig", "--context", "--karmada-kubeconfig", "--karmada-context",
             "--resync-period", "--http-library", "--event-namespace", "serving:",
             "--healthz-port", "--tls-private-key-file", "leader election:",
             "--leader-elect-identity"]
    at = [text.index(f"\n  {flag}" if flag.startswith("--") else f"\n{flag}") for flag in order]
    assert at == sorted(at)


def test_tls_pair(tmp_path: pathlib.Path) -> None:
    cert, key = pki.CertificateAuthority().serving("p", ["127.0.0.1"], []).write(tmp_path, "t")
    loaded = _load(BARE, ["--tls-cert-file", str(cert), "--tls-private-key-file", str(key)])
    assert loaded.tls == serving.TLSConfig(str(cert), str(key))


async def _get(port: int, path: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    answer = await reader.read()
    writer.close()
    return answer


async def test_serve_runs_the_work_with_the_registry_served() -> None:
    loaded = _load(BARE, ["--healthz-port", "0", "--bind-address", "127.0.0.1"])
    seen: dict[str, bytes] = {}
    closed: list[str] = []

    async def start(running: process.Process) -> process.Work:
        assert running.clients == () and running.leadership is None
        with pytest.raises(TypeError, match="leader-election flags"):
            running.elect("x", lambda term: None, None)  # type: ignore[arg-type,return-value]
        running.server.add_readiness("own", lambda: (False, "not yet"))

        async def close() -> None:
            closed.append("closed")

        running.cleanup.push_async_callback(close)

        async def work() -> None:
            seen["metrics"] = await _get(running.server.bound_port, "/metrics")
            seen["readyz"] = await _get(running.server.bound_port, "/readyz?verbose")

        return work()

    await process.serve(loaded, process.Component("bare"), start)
    assert b'clusterhealth_build_info{component="bare"' in seen["metrics"]
    assert b"process_cpu_seconds_total" in seen["metrics"]
    assert b"clusterhealth_leader" not in seen["metrics"]
    assert seen["readyz"].startswith(b"HTTP/1.1 503") and b"[-]own failed: not yet" in \
        seen["readyz"]
    assert closed == ["closed"]


async def test_a_start_up_error_stops_before_serving(unused_tcp_port: int) -> None:
    loaded = _load(BARE, ["--healthz-port", str(unused_tcp_port), "--bind-address",
                          "127.0.0.1"])

    async def start(running: process.Process) -> process.Work:
        raise runner.StartupError("cannot start")

    with pytest.raises(runner.StartupError, match="cannot start"):
        await process.serve(loaded, process.Component("bare"), start)
    with pytest.raises(ConnectionRefusedError):
        await _get(unused_tcp_port, "/healthz")
