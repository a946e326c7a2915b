"""The MCI controller's flags: the new ones reach the settings and the provider."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from clusterhealth_core import clock as clocks
from clusterhealth_core import members
from clusterhealth_core import settings as core_settings
from clusterhealth_localenv import pki
from clusterhealth_mci import app
from clusterhealth_mci import settings as mci_settings
from clusterhealth_mci.providers.haproxy import provider as haproxy_provider


@pytest.fixture
def kubeconfig(tmp_path: pathlib.Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "cp",
        "clusters": [{"name": "cp", "cluster": {"server": "https://127.0.0.1:1",
                                                "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "cp", "context": {"cluster": "cp", "user": "u"}}]}))
    return str(path)


def test_defaults(kubeconfig: str) -> None:
    loaded = mci_settings.load(["--kubeconfig", kubeconfig], {})
    assert loaded.cluster_secret_namespace == "karmada-cluster"
    assert (loaded.member_credentials, loaded.member_secret_namespace) == (
        "readonly", "clusterhealth-mci-credentials")
    assert mci_settings.MEMBER_CREDENTIALS == members.MODES
    assert loaded.haproxy_monitor_interval == 1.0
    assert loaded.tls is None


def test_new_flags_and_their_environment_variables(kubeconfig: str) -> None:
    loaded = mci_settings.load(["--kubeconfig", kubeconfig, "--haproxy-monitor-interval",
                                "750ms"], {"CLUSTERHEALTH_MCI_CLUSTER_SECRET_NAMESPACE": "creds",
                                           "CLUSTERHEALTH_MCI_MEMBER_CREDENTIALS": "cluster",
                                           "CLUSTERHEALTH_MCI_MEMBER_SECRET_NAMESPACE": "ro"})
    assert loaded.haproxy_monitor_interval == 0.75
    assert loaded.cluster_secret_namespace == "creds"
    assert (loaded.member_credentials, loaded.member_secret_namespace) == ("cluster", "ro")
    provider = app.make_provider(loaded, clocks.Clock())
    assert isinstance(provider, haproxy_provider.HAProxyProvider)
    assert provider.monitor_interval == 0.75


@pytest.mark.parametrize(("argv", "message"), [
    (["--haproxy-monitor-interval", "0s"], "--haproxy-monitor-interval"),
    (["--haproxy-monitor-interval", "soon"], "--haproxy-monitor-interval"),
    (["--cluster-secret-namespace", "Karmada_Cluster"], "--cluster-secret-namespace"),
    (["--member-secret-namespace", "Creds!"], "--member-secret-namespace"),
    (["--member-credentials", "admin"], "--member-credentials"),
    (["--tls-cert-file", "/nonexistent.pem"], "--tls-private-key-file is missing"),
])
def test_bad_values_are_one_clear_error(kubeconfig: str, argv: list[str],
                                        message: str) -> None:
    with pytest.raises(core_settings.SettingsError, match=message):
        mci_settings.load(["--kubeconfig", kubeconfig, *argv], {})


def test_tls_serving(kubeconfig: str, tmp_path: pathlib.Path) -> None:
    pair = pki.CertificateAuthority().serving("mci", ["127.0.0.1"], ["localhost"])
    cert, key = pair.write(tmp_path, "serving")
    loaded = mci_settings.load(["--kubeconfig", kubeconfig, "--tls-cert-file", str(cert),
                                "--tls-private-key-file", str(key)], {})
    assert loaded.tls is not None
    assert (loaded.tls.cert_file, loaded.tls.key_file) == (str(cert), str(key))
