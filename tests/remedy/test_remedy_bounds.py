"""Statuses the API server accepts however large the input, and no hot loop when it refuses.

A Remedy naming 3,000 clusters once produced a ``ClustersResolved`` message
over the API server's 32 KiB limit (the CRD now takes at most 1,024 names, which
still make a message over it): the whole status was rejected (422) and
retried for ever.  Messages are bounded now; and a 422 on one of our own
status writes (provoked here by a ValidatingAdmissionPolicy, which answers
422 Invalid) is reported once and not retried until the object changes.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import remedykit as k

import testkit
from clusterhealth_core import status
from clusterhealth_core.api import cluster, meta
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources

Start = Callable[..., k.Controller]
ADMISSION = "admissionregistration.k8s.io"
POLICIES = resources.Resource(ADMISSION, "v1", "validatingadmissionpolicies",
                              "ValidatingAdmissionPolicy", namespaced=False)
BINDINGS = resources.Resource(ADMISSION, "v1", "validatingadmissionpolicybindings",
                              "ValidatingAdmissionPolicyBinding", namespaced=False)


def _metric(text: str, name: str, labels: str) -> float:
    match = re.search(rf"^{re.escape(name)}\{{{re.escape(labels)}\}} (\S+)$", text, re.M)
    assert match is not None, f"{name}{{{labels}}} not exported"
    return float(match.group(1))


async def _condition(cp: kube.ApiClient, remedy: str, ctype: str) -> dict[str, Any] | None:
    st = (await cp.get(resources.REMEDIES, remedy)).get("status") or {}
    return next((c for c in st.get("conditions") or [] if c["type"] == ctype), None)


async def test_remedy_naming_1024_missing_clusters_gets_a_bounded_status(
        controllers: Start, cp: kube.ApiClient, cleanup: dict[str, list[str]]) -> None:
    prefix = testkit.unique("gone")  # 11 characters; names of 35
    # as many as the CRD takes (cluster.MAX_CLUSTER_NAMES): still far over a message's size
    names = [f"{prefix}-missing-member-{i:08d}" for i in range(cluster.MAX_CLUSTER_NAMES)]
    remedy = testkit.unique("many")
    await k.make_remedy(cp, remedy, names)
    cleanup["remedies"].append(remedy)
    ctrl = controllers()

    resolved = await k.eventually(lambda: _condition(cp, remedy, "ClustersResolved"))
    assert resolved["status"] == "False"
    assert resolved["reason"] == "UnknownClusters"
    message = resolved["message"]
    assert len(names) * len(names[0]) > meta.MAX_CONDITION_MESSAGE  # would not have fitted
    assert len(message) <= len("no Cluster named ") + meta.MESSAGE_BUDGET
    assert message.startswith(f"no Cluster named {names[0]}, {names[1]}")
    shown = len(message.split(" \u2026 ")[0].split(", "))
    assert message.endswith(f"\u2026 and {len(names) - shown} more")
    effective = await _condition(cp, remedy, "Effective")
    assert effective is not None and effective["status"] == "True"

    text = await asyncio.to_thread(ctrl.metrics)
    assert _metric(text, "clusterhealth_remedy_status_rejected_total", 'kind="Remedy"') == 0
    assert _metric(text, "clusterhealth_controller_reconcile_total",
                   'controller="remedy-status",result="error"') == 0


@pytest.fixture
async def refusing_policy(cp: kube.ApiClient) -> AsyncIterator[str]:
    """A ValidatingAdmissionPolicy refusing status writes to objects named ``<prefix>*``."""
    prefix = testkit.unique("refused")
    policy = {
        "apiVersion": f"{ADMISSION}/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": prefix},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["remedy.karmada.io", "cluster.karmada.io"],
                "apiVersions": ["*"], "operations": ["UPDATE"],
                "resources": ["remedies/status", "clusters/status"]}]},
            "validations": [{"expression": f"!object.metadata.name.startsWith('{prefix}')",
                             "message": "status refused by the test's admission policy"}],
        },
    }
    binding = {"apiVersion": f"{ADMISSION}/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": prefix},
               "spec": {"policyName": prefix, "validationActions": ["Deny"]}}
    await cp.create(POLICIES, policy)
    await cp.create(BINDINGS, binding)
    try:
        yield prefix
    finally:
        await cp.delete(BINDINGS, prefix, missing_ok=True)
        await cp.delete(POLICIES, prefix, missing_ok=True)


async def test_a_rejected_status_write_is_reported_once_not_retried(
        controllers: Start, cp: kube.ApiClient, cleanup: dict[str, list[str]],
        refusing_policy: str) -> None:
    cluster, remedy = f"{refusing_policy}-c", f"{refusing_policy}-r"
    await testkit.make_cluster(cp, cluster)
    cleanup["clusters"].append(cluster)
    await k.make_remedy(cp, remedy, [cluster], match=None)  # TrafficControl at once
    cleanup["remedies"].append(remedy)

    async def policy_active() -> bool:
        try:
            await status.apply_status(cp, resources.REMEDIES, remedy, {},
                                      field_manager="test-probe")
        except errors.Invalid:
            return True
        return False

    await k.eventually(policy_active)  # the API server has loaded the policy: 422 Invalid
    ctrl = controllers()

    async def reported() -> dict[str, dict[str, Any]] | None:
        found = {}
        for name in (cluster, remedy):
            events = await cp.list(resources.EVENTS, namespace="default",
                                   field_selector=f"involvedObject.name={name},"
                                                  "reason=StatusRejected")
            if not events["items"]:
                return None
            found[name] = events["items"][0]
        return found

    events = await k.eventually(reported)
    assert events[cluster]["type"] == "Warning"
    assert events[cluster]["involvedObject"]["kind"] == "Cluster"
    assert events[remedy]["involvedObject"]["kind"] == "Remedy"
    assert "refused by the test's admission policy" in events[remedy]["message"]

    await asyncio.sleep(3)  # long enough for dozens of retries with backoff
    text = await asyncio.to_thread(ctrl.metrics)
    for kind, controller in (("Cluster", "remedy-cluster"), ("Remedy", "remedy-status")):
        assert _metric(text, "clusterhealth_remedy_status_rejected_total",
                       f'kind="{kind}"') == 1, kind
        assert _metric(text, "clusterhealth_controller_reconcile_total",
                       f'controller="{controller}",result="terminal"') == 1, kind
        assert _metric(text, "clusterhealth_controller_reconcile_total",
                       f'controller="{controller}",result="error"') == 0, kind
    assert "BUG: the API server rejected the status" in ctrl.log.read_text()
    for name in (cluster, remedy):
        (event,) = [e for e in (await cp.list(
            resources.EVENTS, namespace="default",
            field_selector=f"involvedObject.name={name},reason=StatusRejected"))["items"]]
        assert event["count"] == 1, name
