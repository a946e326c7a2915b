"""The webhook process: its flags (bad ones stop it before anything starts) and its life."""

from __future__ import annotations

import asyncio
import json
import pathlib
import signal
import socket
import subprocess
import urllib.request

import pytest
import whkit

from clusterhealth_controlplane.webhook import decision
from clusterhealth_controlplane.webhook import settings as webhook_settings
from clusterhealth_core import settings
from clusterhealth_localenv import pki


@pytest.fixture
def ca() -> pki.CertificateAuthority:
    return pki.CertificateAuthority()


@pytest.fixture
def cert_dir(tmp_path: pathlib.Path, ca: pki.CertificateAuthority) -> pathlib.Path:
    volume = pki.SecretVolume(tmp_path / "certs")
    volume.root.mkdir()
    volume.write(whkit.issue(ca))
    return volume.root


def test_defaults_are_karmadas(cert_dir: pathlib.Path) -> None:
    loaded = webhook_settings.load([f"--cert-dir={cert_dir}"], environ={})
    assert loaded.defaults == decision.Defaults(not_ready_seconds=300, unreachable_seconds=300)
    assert loaded.secure_port == 8443
    assert loaded.webhook_tls.cert_file == str(cert_dir / "tls.crt")
    assert loaded.webhook_tls.key_file == str(cert_dir / "tls.key")
    assert loaded.bind_address == "::"
    assert loaded.healthz_port == 10361
    assert loaded.tls is None
    assert webhook_settings.parser().get_default("cert_dir") == \
        "/tmp/k8s-webhook-server/serving-certs"


def test_flags_and_environment(cert_dir: pathlib.Path) -> None:
    (cert_dir / "other.pem").symlink_to(cert_dir / "tls.crt")
    loaded = webhook_settings.load(
        [f"--cert-dir={cert_dir}", "--tls-cert-file-name=other.pem",
         "--default-not-ready-toleration-seconds=0", "--secure-port=9443"],
        environ={"CLUSTERHEALTH_WEBHOOK_DEFAULT_UNREACHABLE_TOLERATION_SECONDS": "600"})
    assert loaded.defaults == decision.Defaults(not_ready_seconds=0, unreachable_seconds=600)
    assert loaded.secure_port == 9443
    assert loaded.webhook_tls.cert_file == str(cert_dir / "other.pem")


@pytest.mark.parametrize(("flag", "message"), [
    ("--default-not-ready-toleration-seconds=-1",
     "'-1': a toleration time must be >= 0 seconds"),
    ("--default-unreachable-toleration-seconds=-300",
     "'-300': a toleration time must be >= 0 seconds"),
    ("--default-unreachable-toleration-seconds=5m", "'5m' is not a whole number of seconds"),
    ("--default-not-ready-toleration-seconds=1.5", "'1.5' is not a whole number of seconds"),
    ("--default-not-ready-toleration-seconds=9223372036854775808", "is too large"),
    ("--secure-port=70000", "is not a port number"),
])
def test_bad_values_are_refused_with_the_flag_named(cert_dir: pathlib.Path, flag: str,
                                                    message: str) -> None:
    with pytest.raises(settings.SettingsError) as raised:
        webhook_settings.load([f"--cert-dir={cert_dir}", flag], environ={})
    assert flag.split("=")[0] in str(raised.value)
    assert message in str(raised.value)


def test_certificate_problems_are_flag_errors(tmp_path: pathlib.Path,
                                              cert_dir: pathlib.Path,
                                              ca: pki.CertificateAuthority) -> None:
    with pytest.raises(settings.SettingsError, match="--cert-dir: cannot read TLS certificate"):
        webhook_settings.load([f"--cert-dir={tmp_path / 'missing'}"], environ={})
    other = whkit.issue(ca)
    (cert_dir / "..data" / "tls.key").write_bytes(other.key_pem)
    with pytest.raises(settings.SettingsError, match="they do not match"):
        webhook_settings.load([f"--cert-dir={cert_dir}"], environ={})


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_negative_toleration_stops_the_process(python: str, python_env: dict[str, str],
                                               cert_dir: pathlib.Path) -> None:
    proc = subprocess.run(
        [python, "-m", "clusterhealth_controlplane.webhook", f"--cert-dir={cert_dir}",
         "--default-not-ready-toleration-seconds=-1", "--bind-address=127.0.0.1",
         f"--secure-port={_free_port()}", f"--healthz-port={_free_port()}"],
        env=python_env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "clusterhealth-webhook: error: argument --default-not-ready-toleration-seconds: "
        "'-1': a toleration time must be >= 0 seconds (0 evicts at once)")
    assert "serving" not in proc.stdout + proc.stderr


async def test_the_process_serves_until_terminated(python: str, python_env: dict[str, str],
                                                   cert_dir: pathlib.Path,
                                                   ca: pki.CertificateAuthority) -> None:
    secure, health = _free_port(), _free_port()
    proc = await asyncio.create_subprocess_exec(
        python, "-m", "clusterhealth_controlplane.webhook", f"--cert-dir={cert_dir}",
        "--bind-address=127.0.0.1", f"--secure-port={secure}", f"--healthz-port={health}",
        "--default-unreachable-toleration-seconds=60",
        env=python_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        async with asyncio.timeout(60):
            while True:
                try:
                    ready = await asyncio.to_thread(_get, f"http://127.0.0.1:{health}/readyz"
                                                    "?verbose")
                    break
                except OSError:
                    assert proc.returncode is None, proc.stderr and await proc.stderr.read()
                    await asyncio.sleep(0.1)
        assert "[+]webhook ok: serving /default-tolerations over HTTPS" in ready
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "request": {"uid": "x", "operation": "CREATE", "object": {},
                                       "kind": {"group": "policy.karmada.io",
                                                "kind": "PropagationPolicy"}}}).encode()
        answer, _ = await whkit.request(secure, ca, body)
        assert json.loads(answer.body)["response"]["allowed"] is True
        metrics = await asyncio.to_thread(_get, f"http://127.0.0.1:{health}/metrics")
        assert ('clusterhealth_webhook_admission_requests_total{kind="PropagationPolicy",'
                'result="mutated"} 1.0') in metrics
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            _, errors = await proc.communicate()
        assert proc.returncode == 0, errors
        assert b"shutting down" in errors
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as answer:
        text: str = answer.read().decode()
        return text
