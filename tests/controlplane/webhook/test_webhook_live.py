"""The webhook called by a real kube-apiserver over HTTPS on loopback.

A MutatingWebhookConfiguration (``clientConfig.url`` to the in-process server, the
test CA as ``caBundle``) sends both policy kinds to the webhook; what the API server
stores is checked. Each configuration selects only this test's objects by a unique
label (``objectSelector``), so that no other test's policies ever go through it, and
is deleted afterwards. The configuration reaches the API server's admission chain
asynchronously, so each test first waits until a dry-run create comes back mutated.
"""

from __future__ import annotations

import base64
import contextlib
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import cpkit
import pytest
import whkit

import testkit
from clusterhealth_controlplane.webhook import decision, server
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import pki, waiting

WEBHOOKS = resources.Resource("admissionregistration.k8s.io", "v1",
                              "mutatingwebhookconfigurations", "MutatingWebhookConfiguration",
                              namespaced=False)
WEBHOOK_NAME = "default-tolerations.clusterhealth.io"
LABEL = "clusterhealth.io/webhook-test"
NOT_READY = "cluster.karmada.io/not-ready"
UNREACHABLE = "cluster.karmada.io/unreachable"
DEFAULTS = decision.Defaults(not_ready_seconds=300, unreachable_seconds=120)
ADDED = [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute",
          "tolerationSeconds": 300},
         {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
          "tolerationSeconds": 120}]


def configuration(name: str, port: int, ca: pki.CertificateAuthority, failure_policy: str,
                  selector: str) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": WEBHOOK_NAME,
            "clientConfig": {"url": f"https://127.0.0.1:{port}{server.PATH}",
                             "caBundle": base64.b64encode(ca.cert_pem).decode()},
            "rules": [{"apiGroups": ["policy.karmada.io"], "apiVersions": ["v1alpha1"],
                       "operations": ["CREATE", "UPDATE"],
                       "resources": ["propagationpolicies", "clusterpropagationpolicies"],
                       "scope": "*"}],
            "objectSelector": {"matchLabels": {LABEL: selector}},
            "failurePolicy": failure_policy,
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 5,
        }],
    }


def policy(name: str, selector: str, namespace: str | None,
           tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    placement: dict[str, Any] = {"clusterAffinity": {"clusterNames": ["member1"]}}
    if tolerations is not None:
        placement["clusterTolerations"] = tolerations
    resource = resources.PROPAGATION_POLICIES if namespace else \
        resources.CLUSTER_PROPAGATION_POLICIES
    metadata: dict[str, Any] = {"name": name, "labels": {LABEL: selector}}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": resource.api_version, "kind": resource.kind, "metadata": metadata,
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap",
                                            "name": name}],
                     "placement": placement}}


def tolerations(stored: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = stored["spec"]["placement"].get("clusterTolerations", [])
    return found


async def dry_run_create(cp: kube.ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    resource = resources.PROPAGATION_POLICIES if body["metadata"].get("namespace") else \
        resources.CLUSTER_PROPAGATION_POLICIES
    created: dict[str, Any] = await cp.request(
        "POST", resource.path(namespace=body["metadata"].get("namespace")),
        params={"dryRun": "All"}, body=body)
    return created


@contextlib.asynccontextmanager
async def registered(cp: kube.ApiClient, webhook: server.WebhookServer,
                     ca: pki.CertificateAuthority, failure_policy: str, namespace: str,
                     ) -> AsyncIterator[str]:
    """A configuration sending this test's policies to ``webhook``, in effect; its label."""
    selector = testkit.unique("sel")
    name = testkit.unique("clusterhealth-webhook-test")
    await cp.create(WEBHOOKS, configuration(name, webhook.bound_port, ca, failure_policy,
                                            selector))
    try:
        probe = policy("probe", selector, namespace)

        async def mutated() -> bool:
            return tolerations(await dry_run_create(cp, probe)) == ADDED

        await waiting.eventually(mutated, timeout=30)
        yield selector
    finally:
        await cp.delete(WEBHOOKS, name, missing_ok=True)


@pytest.fixture
def ca() -> pki.CertificateAuthority:
    return pki.CertificateAuthority()


@pytest.fixture
async def webhook(tmp_path: pathlib.Path, ca: pki.CertificateAuthority
                  ) -> AsyncIterator[server.WebhookServer]:
    volume = pki.SecretVolume(tmp_path)
    volume.write(ca.serving("webhook", ["127.0.0.1"], []))
    async with whkit.running(volume, defaults=DEFAULTS) as running:
        yield running


async def test_policies_get_the_default_tolerations(cp: kube.ApiClient,
                                                    webhook: server.WebhookServer,
                                                    ca: pki.CertificateAuthority) -> None:
    namespace = await cpkit.make_namespace(cp, "webhook")
    cluster_policy = testkit.unique("cpp")
    async with registered(cp, webhook, ca, "Fail", namespace) as selector:
        try:
            # none: both are stored
            stored = await cp.create(resources.PROPAGATION_POLICIES,
                                     policy("plain", selector, namespace))
            assert tolerations(stored) == ADDED
            got = await cp.get(resources.PROPAGATION_POLICIES, "plain", namespace=namespace)
            assert tolerations(got) == ADDED
            # its own not-ready toleration is kept; only unreachable is added
            own: list[dict[str, Any]] = [
                {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 30},
                {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
            stored = await cp.create(resources.PROPAGATION_POLICIES,
                                     policy("own", selector, namespace, own))
            assert tolerations(stored) == [*own, ADDED[1]]
            # one that tolerates every taint gets nothing
            everything: list[dict[str, Any]] = [{"operator": "Exists"}]
            stored = await cp.create(resources.PROPAGATION_POLICIES,
                                     policy("all", selector, namespace, everything))
            assert tolerations(stored) == everything
            # a ClusterPropagationPolicy too
            stored = await cp.create(resources.CLUSTER_PROPAGATION_POLICIES,
                                     policy(cluster_policy, selector, None))
            assert tolerations(stored) == ADDED
            # an UPDATE that drops them gets them back (as Karmada's webhook did)
            got = await cp.get(resources.PROPAGATION_POLICIES, "plain", namespace=namespace)
            got["spec"]["placement"]["clusterTolerations"] = []
            updated = await cp.update(resources.PROPAGATION_POLICIES, got)
            assert tolerations(updated) == ADDED
            # a malformed policy is refused by the API server's own schema validation,
            # in its words (the webhook lets it through, with a warning)
            broken = policy("broken", selector, namespace)
            broken["spec"]["placement"]["clusterTolerations"] = "none"
            with pytest.raises(errors.Invalid) as raised:
                await cp.create(resources.PROPAGATION_POLICIES, broken)
            assert "spec.placement.clusterTolerations" in raised.value.message
            assert "must be of type array" in raised.value.message
        finally:
            await cp.delete(resources.CLUSTER_PROPAGATION_POLICIES, cluster_policy,
                            missing_ok=True)
            await cp.delete(resources.NAMESPACES, namespace)


@contextlib.asynccontextmanager
async def webhook_down(cp: kube.ApiClient, webhook: server.WebhookServer,
                       ca: pki.CertificateAuthority, failure_policy: str,
                       ) -> AsyncIterator[tuple[str, str, int]]:
    """Registered with ``failure_policy``, in effect, then stopped: namespace, label, port."""
    namespace = await cpkit.make_namespace(cp, "webhook")
    try:
        async with registered(cp, webhook, ca, failure_policy, namespace) as selector:
            port = webhook.bound_port
            await webhook.stop()
            yield namespace, selector, port
    finally:
        await cp.delete(resources.NAMESPACES, namespace)


async def test_webhook_down_with_failure_policy_fail_refuses(
        cp: kube.ApiClient, webhook: server.WebhookServer,
        ca: pki.CertificateAuthority) -> None:
    async with webhook_down(cp, webhook, ca, "Fail") as (namespace, selector, port):
        with pytest.raises(errors.ApiError) as raised:
            await cp.create(resources.PROPAGATION_POLICIES,
                            policy("refused", selector, namespace))
        assert raised.value.status == 500
        message = raised.value.message
        assert f'failed calling webhook "{WEBHOOK_NAME}"' in message, message
        assert f"https://127.0.0.1:{port}{server.PATH}" in message, message
        assert "connection refused" in message, message
        with pytest.raises(errors.NotFound):
            await cp.get(resources.PROPAGATION_POLICIES, "refused", namespace=namespace)


async def test_webhook_down_with_failure_policy_ignore_stores_unmutated(
        cp: kube.ApiClient, webhook: server.WebhookServer,
        ca: pki.CertificateAuthority) -> None:
    async with webhook_down(cp, webhook, ca, "Ignore") as (namespace, selector, _):
        stored = await cp.create(resources.PROPAGATION_POLICIES,
                                 policy("unmutated", selector, namespace))
        assert tolerations(stored) == []
        got = await cp.get(resources.PROPAGATION_POLICIES, "unmutated", namespace=namespace)
        assert "clusterTolerations" not in got["spec"]["placement"]
