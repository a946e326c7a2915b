"""The Remedy controller's flags: the Event namespace the API server accepts, serving TLS."""

from __future__ import annotations

import asyncio
import pathlib
import ssl

import pytest
import remedykit
import yaml

import testkit
from clusterhealth_core import serving, settings
from clusterhealth_localenv import environment, pki
from clusterhealth_remedy import __main__ as remedy_main
from clusterhealth_remedy import settings as remedy_settings


def _kubeconfig(tmp_path: pathlib.Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1",
                                               "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return str(path)


@pytest.mark.parametrize("namespace", ["default", "kube-system"])
def test_event_namespaces_the_api_server_accepts(tmp_path: pathlib.Path,
                                                 namespace: str) -> None:
    loaded = remedy_settings.load(["--kubeconfig", _kubeconfig(tmp_path),
                                   "--event-namespace", namespace], environ={})
    assert loaded.event_namespace == namespace
    from_env = remedy_settings.load(["--kubeconfig", _kubeconfig(tmp_path)],
                                    environ={"CLUSTERHEALTH_REMEDY_EVENT_NAMESPACE": namespace})
    assert from_env.event_namespace == namespace


@pytest.mark.parametrize("namespace", ["clusterhealth-system", "karmada-system", "Default", ""])
def test_other_event_namespaces_are_refused(tmp_path: pathlib.Path, namespace: str) -> None:
    with pytest.raises(settings.SettingsError, match="default or kube-system"):
        remedy_settings.load(["--kubeconfig", _kubeconfig(tmp_path),
                              "--event-namespace", namespace], environ={})


def test_a_refused_event_namespace_exits_2(tmp_path: pathlib.Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = remedy_main.main(["--kubeconfig", _kubeconfig(tmp_path),
                             "--event-namespace", "clusterhealth-system"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--event-namespace" in err and "'clusterhealth-system'" in err


def test_tls_flags(tmp_path: pathlib.Path) -> None:
    ca = pki.CertificateAuthority()
    cert, key = ca.serving("remedy", ["127.0.0.1"], ["localhost"]).write(tmp_path, "tls")
    plain = remedy_settings.load(["--kubeconfig", _kubeconfig(tmp_path)], environ={})
    assert plain.tls is None
    loaded = remedy_settings.load(["--kubeconfig", _kubeconfig(tmp_path),
                                   "--tls-cert-file", str(cert),
                                   "--tls-private-key-file", str(key)], environ={})
    assert loaded.tls == serving.TLSConfig(str(cert), str(key))
    with pytest.raises(settings.SettingsError, match="--tls-private-key-file is missing"):
        remedy_settings.load(["--kubeconfig", _kubeconfig(tmp_path),
                              "--tls-cert-file", str(cert)], environ={})


async def test_the_controller_serves_https_with_the_tls_flags(
        env: environment.LocalEnvironment, python_env: dict[str, str],
        tmp_path: pathlib.Path) -> None:
    ca = pki.CertificateAuthority()
    cert, key = ca.serving("remedy", ["127.0.0.1"], ["localhost"]).write(tmp_path, "tls")
    ctrl = remedykit.start_controller(
        env, python_env, testkit.unique("tls"), tmp_path / "remedy.log",
        ["--tls-cert-file", str(cert), "--tls-private-key-file", str(key)])
    context = ssl.create_default_context(cadata=ca.cert_pem.decode())
    try:
        async def healthz() -> bytes | None:
            try:
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1", ctrl.port, ssl=context, server_hostname="localhost")
            except OSError:
                return None
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            answer = await reader.read()
            writer.close()
            return answer

        answer = await remedykit.eventually(healthz)
        assert answer.startswith(b"HTTP/1.1 200")
    finally:
        ctrl.stop()
