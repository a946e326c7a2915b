"""The controlplane chart's webhook certificate across upgrades, against a real API server.

``helm template --dry-run=server`` renders as an install or upgrade does: ``lookup``
reads the API server. A certificate Secret already there (from an earlier install)
must be rendered again unchanged, with the ``caBundle`` its CA; a Secret of the
user's gives its ``ca.crt`` as the ``caBundle``. (``helm template`` alone cannot look
anything up: the render tests in ``test_controlplane_chart.py`` cover that case.)
"""

from __future__ import annotations

import base64
import pathlib
import uuid
from typing import Any

import chartkit
import yaml

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment, pki

CHART = pathlib.Path(__file__).resolve().parents[2] / "charts" / "controlplane"
RELEASE = "webhook-live"
WEBHOOK = f"{RELEASE}-clusterhealth-controlplane-webhook"


def _render(helm: str, env: environment.LocalEnvironment, namespace: str,
            *sets: str) -> list[chartkit.Manifest]:
    args = ["template", RELEASE, str(CHART), "--namespace", namespace,
            "--dry-run=server", "--kubeconfig", str(env.kubeconfig())]
    for item in sets:
        args += ["--set", item]
    proc = chartkit.run_helm(helm, *args)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def _ca_bundle(documents: list[chartkit.Manifest]) -> str:
    configuration = chartkit.one(documents, "MutatingWebhookConfiguration", WEBHOOK)
    bundle: str = configuration["webhooks"][0]["clientConfig"]["caBundle"]
    return bundle


async def test_an_upgrade_keeps_the_certificate(env: environment.LocalEnvironment,
                                                cp: kube.ApiClient, helm: str) -> None:
    namespace = f"webhook-chart-{uuid.uuid4().hex[:6]}"
    await cp.create(resources.NAMESPACES, {"metadata": {"name": namespace}})
    try:
        first = _render(helm, env, namespace)
        secret = chartkit.one(first, "Secret", f"{WEBHOOK}-cert")
        assert _ca_bundle(first) == secret["data"]["ca.crt"]
        # nothing there yet: every render makes a new pair
        assert chartkit.one(_render(helm, env, namespace), "Secret",
                            f"{WEBHOOK}-cert")["data"] != secret["data"]
        # installed: the next render (an upgrade) finds it and keeps it, caBundle included
        await cp.create(resources.SECRETS, {key: secret[key] for key in
                                            ("metadata", "type", "data")})
        for _ in range(2):
            again = _render(helm, env, namespace)
            assert chartkit.one(again, "Secret", f"{WEBHOOK}-cert")["data"] == secret["data"]
            assert _ca_bundle(again) == secret["data"]["ca.crt"]
        # a Secret of the user's: its ca.crt is the caBundle; the chart makes none
        ca = pki.CertificateAuthority()
        pair = ca.serving(WEBHOOK, [], [f"{WEBHOOK}.{namespace}.svc"])
        mine: dict[str, Any] = {
            "metadata": {"name": "my-webhook-tls", "namespace": namespace},
            "type": "kubernetes.io/tls",
            "data": {"tls.crt": base64.b64encode(pair.cert_pem).decode(),
                     "tls.key": base64.b64encode(pair.key_pem).decode(),
                     "ca.crt": base64.b64encode(ca.cert_pem).decode()}}
        await cp.create(resources.SECRETS, mine)
        yours = _render(helm, env, namespace, "webhook.certificate.secretName=my-webhook-tls")
        assert _ca_bundle(yours) == mine["data"]["ca.crt"]
        assert not [d for d in yours if d["kind"] == "Secret"]
    finally:
        await cp.delete(resources.NAMESPACES, namespace)
