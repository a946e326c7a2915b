"""How the Karmada mode runs Karmada's chain: flags, taint policies, webhook registration.

Pure: the command lines and objects the mode hands to Karmada's parts, from
its settings.  The parts themselves run in the failover tests and benchmarks.
"""

from __future__ import annotations

import base64
import pathlib

import pytest

from clusterhealth_localenv import binaries as bins
from clusterhealth_localenv import karmada, pki, processes


def test_karmada_failover_switches_its_eviction_on_with_karmada_s_defaults() -> None:
    args = karmada.KarmadaFailover().controller_manager_args()
    assert "--feature-gates=Failover=true" in args
    assert "--enable-no-execute-taint-eviction=true" in args
    assert "--no-execute-taint-eviction-purge-mode=Gracefully" in args
    assert "--resource-eviction-rate=0.5" in args
    assert "--graceful-eviction-timeout=600s" in args
    raised = karmada.KarmadaFailover(eviction_rate=1e6).controller_manager_args()
    assert "--resource-eviction-rate=1e+06" in raised


def test_the_chain_preset_runs_every_part() -> None:
    settings = karmada.KarmadaSettings.chain(status_update_frequency=0.5)
    assert settings.controllers == karmada.FAILOVER_CHAIN
    assert {"cluster", "clusterStatus", "clustertaintpolicy", "gracefulEviction", "binding",
            "execution", "workStatus", "bindingStatus", "namespace"} == set(settings.controllers)
    assert settings.scheduler and settings.webhook and settings.crds is None
    assert settings.failover == karmada.KarmadaFailover()
    carrying = karmada.KarmadaSettings.chain(karmada.PROPAGATION, failover=None)
    assert carrying.failover is None
    assert not {"clusterStatus", "gracefulEviction", "clustertaintpolicy"} & set(
        carrying.controllers)


def test_taint_policies_give_noexecute_from_ready() -> None:
    policies = {p["spec"]["taints"][0]["key"]: p["spec"] for p in karmada.taint_policies()}
    assert set(policies) == {karmada.NOT_READY, karmada.UNREACHABLE}
    for key, status in ((karmada.NOT_READY, "False"), (karmada.UNREACHABLE, "Unknown")):
        spec = policies[key]
        assert spec["taints"] == [{"key": key, "effect": "NoExecute"}]
        assert spec["addOnConditions"] == [
            {"conditionType": "Ready", "operator": "In", "statusValues": [status]}]
        assert spec["removeOnConditions"][0]["statusValues"] == ["True"]
        assert "targetClusters" not in spec  # every Cluster


MANIFEST = """\
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutating-config}
webhooks:
  - name: propagationpolicy.karmada.io
    clientConfig:
      url: https://karmada-webhook.karmada-system.svc:443/mutate-propagationpolicy
      caBundle: {{caBundle}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: validating-config}
webhooks:
  - name: propagationpolicy.karmada.io
    clientConfig:
      url: https://karmada-webhook.karmada-system.svc:443/validate-propagationpolicy
      caBundle: {{caBundle}}
"""


def test_webhook_configurations_point_at_the_process() -> None:
    documents = karmada.webhook_configurations(MANIFEST, "https://127.0.2.1:4443", b"PEM")
    assert [d["kind"] for d in documents] == ["MutatingWebhookConfiguration",
                                              "ValidatingWebhookConfiguration"]
    config = documents[0]["webhooks"][0]["clientConfig"]
    assert config["url"] == "https://127.0.2.1:4443/mutate-propagationpolicy"
    assert base64.b64decode(config["caBundle"]) == b"PEM"
    with pytest.raises(processes.StartError, match="unexpected shape"):
        karmada.webhook_configurations(MANIFEST.split("---")[0], "https://127.0.2.1:1", b"")


def test_karmada_s_own_webhook_configuration_is_kept_and_understood() -> None:
    """The manifest of the build (Karmada's module): every URL rewritten."""
    webhook = bins.ensure_karmada_webhook()
    text = webhook.configuration.read_text()
    documents = karmada.webhook_configurations(text, "https://127.0.2.1:4443", b"PEM")
    urls = [hook["clientConfig"]["url"] for doc in documents for hook in doc["webhooks"]]
    assert urls and all(url.startswith("https://127.0.2.1:4443/") for url in urls)
    assert any(url.endswith("/validate-clustertaintpolicy") for url in urls)
    assert webhook.binary.is_file()


def test_the_webhook_runs_with_a_certificate_for_its_address(tmp_path: pathlib.Path) -> None:
    ca = pki.CertificateAuthority()
    settings = karmada.KarmadaSettings.chain()
    plane = karmada.KarmadaControlPlane(
        bins.karmada_binaries(), settings, tmp_path / "karmada", tmp_path / "logs", ca,
        tmp_path / "kubeconfig", "http://127.0.0.1:1", "/x", 5.0,
        scheduler=tmp_path / "karmada-scheduler",
        webhook=bins.KarmadaWebhook(tmp_path / "karmada-webhook", _manifest(tmp_path)))
    assert plane.webhook is not None and plane.scheduler is not None
    argv = plane.webhook.argv
    assert f"--secure-port={plane.webhook_port}" in argv
    assert "--allow-no-execute-taint-policy=true" in argv
    assert (tmp_path / "karmada" / "webhook-certs" / "tls.crt").is_file()
    assert "--enable-scheduler-estimator=false" in plane.scheduler.argv
    assert "--enable-no-execute-taint-eviction=true" in plane.controller_manager.argv
    # other settings for the next start, while stopped
    plane.configure(karmada.KarmadaSettings.chain(failover=None))
    assert "--enable-no-execute-taint-eviction=true" not in plane.controller_manager.argv
    assert "--allow-no-execute-taint-policy=true" not in plane.webhook.argv


def _manifest(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "webhook-configuration.yaml"
    path.write_text(MANIFEST)
    return path
