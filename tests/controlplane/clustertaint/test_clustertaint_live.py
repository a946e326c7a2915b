"""The cluster-taint controller against a real API server.

Conditions are written the way their owners write them (server-side apply of
the Cluster's status with the owner's field manager: the cluster-status
controller's Ready, the agent's ``ServiceDomainNameResolutionReady``); only
the ``clusterTaint`` controller runs, and its taints, Events and metrics are
read back from the API server and the process registry.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import AsyncIterator
from typing import Any

import cpkit
import pytest

import testkit
from clusterhealth_controlplane import options
from clusterhealth_controlplane.clustertaint import controller
from clusterhealth_core import status
from clusterhealth_core.api import groups, meta
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment, waiting

NOT_READY, UNREACHABLE = groups.TAINT_CLUSTER_NOT_READY, groups.TAINT_CLUSTER_UNREACHABLE
DNS = groups.CONDITION_SERVICE_DOMAIN_NAME_RESOLUTION_READY
DNS_TAINT = "clusterhealth.io/dns-failure"
STATUS_MANAGER = "test-cluster-status"
AGENT_MANAGER = "clusterhealth-agent"
FAST = options.Options(taints=options.Taints(failover_eviction_timeout=1.0))
USER_TAINT = {"key": "maintenance", "value": "planned", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[environment.LocalEnvironment]:
    """A control plane of its own, without members.

    The controller taints every Cluster it sees (one without a Ready condition
    gets not-ready, as in Karmada), so it must not run where other tests'
    Clusters live.
    """
    async with environment.LocalEnvironment(environment.EnvironmentConfig(members=())) as local:
        yield local


@contextlib.asynccontextmanager
async def a_cluster(api: kube.ApiClient, taints: list[dict[str, Any]] | None = None,
                    ) -> AsyncIterator[str]:
    name = testkit.unique("tainted")
    spec: dict[str, Any] = {"apiEndpoint": "https://127.0.0.1:1", "syncMode": "Push"}
    if taints:
        spec["taints"] = taints
    await api.create(resources.CLUSTERS, {"apiVersion": resources.CLUSTERS.api_version,
                                          "kind": "Cluster", "metadata": {"name": name},
                                          "spec": spec})
    try:
        yield name
    finally:
        await api.delete(resources.CLUSTERS, name, missing_ok=True)


async def condition(api: kube.ApiClient, cluster: str, type_: str, value: str, *,
                    manager: str, reason: str = "Probed") -> None:
    await status.apply_conditions(api, resources.CLUSTERS, cluster, [meta.Condition(
        type=type_, status=meta.ConditionStatus(value), reason=reason,
        message=f"{type_} is {value}",
        last_transition_time=datetime.datetime.now(datetime.UTC))], field_manager=manager)


async def taints(api: kube.ApiClient, cluster: str) -> list[dict[str, Any]]:
    obj = await api.get(resources.CLUSTERS, cluster)
    found: list[dict[str, Any]] = obj["spec"].get("taints") or []
    return found


def ids(found: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(t["key"], t["effect"]) for t in found]


async def until(api: kube.ApiClient, cluster: str, wanted: list[tuple[str, str]],
                timeout: float = 20) -> list[dict[str, Any]]:
    async def check() -> tuple[list[dict[str, Any]]] | None:
        found = await taints(api, cluster)
        return (found,) if ids(found) == wanted else None  # a tuple: [] is an answer too
    result: tuple[list[dict[str, Any]]] = await waiting.eventually(check, timeout=timeout)
    return result[0]


async def events(api: kube.ApiClient, cluster: str, reason: str) -> list[dict[str, Any]]:
    listed = await api.list(resources.EVENTS, namespace="default",
                            field_selector=f"involvedObject.name={cluster}")
    return [e for e in listed["items"] if e.get("reason") == reason]


def sample(running: cpkit.Running, name: str, labels: dict[str, str]) -> float | None:
    value = running.registry.get_sample_value(name, labels)
    return value


async def test_ready_false_then_noexecute_then_true_clears(
        env: environment.LocalEnvironment) -> None:
    async with env.client() as api, a_cluster(api, [USER_TAINT]) as name:
        await condition(api, name, groups.CONDITION_READY, "False", manager=STATUS_MANAGER,
                        reason="ClusterNotReachable")
        async with cpkit.running_manager(api, ["clusterTaint"], failover=FAST) as running:
            schedule = await until(api, name, [("maintenance", "NoSchedule"),
                                               (NOT_READY, "NoSchedule")])
            assert schedule[0] == USER_TAINT  # untouched: no timeAdded added, first in place
            execute = await until(api, name, [("maintenance", "NoSchedule"),
                                              (NOT_READY, "NoSchedule"),
                                              (NOT_READY, "NoExecute")])
            assert execute[1] == schedule[1]  # the NoSchedule taint kept its timeAdded
            added = [meta.parse_time(t["timeAdded"]) for t in execute[1:]]
            assert (added[1] - added[0]).total_seconds() >= 1.0

            obj = await api.get(resources.CLUSTERS, name)
            managers = {m["manager"] for m in obj["metadata"]["managedFields"]}
            assert controller.FIELD_MANAGER in managers and STATUS_MANAGER in managers
            assert [c["type"] for c in obj["status"]["conditions"]] == ["Ready"]

            assert await waiting.eventually(lambda: _noexecute_event(api, name), timeout=20)
            assert sample(running, "clusterhealth_cluster_taint_changes_total",
                          {"key": NOT_READY, "effect": "NoExecute", "change": "added"}) == 1
            assert sample(running, "clusterhealth_cluster_taints",
                          {"cluster": name, "key": NOT_READY, "effect": "NoExecute"}) == 1

            await condition(api, name, groups.CONDITION_READY, "True", manager=STATUS_MANAGER,
                            reason="ClusterReady")
            cleared = await until(api, name, [("maintenance", "NoSchedule")])
            assert cleared == [USER_TAINT]
            removed = await waiting.eventually(
                lambda: _removed_both(api, name), timeout=20)
            assert removed
            assert sample(running, "clusterhealth_cluster_taint_changes_total",
                          {"key": NOT_READY, "effect": "NoSchedule", "change": "removed"}) == 1
            assert sample(running, "clusterhealth_cluster_taints",
                          {"cluster": name, "key": NOT_READY, "effect": "NoExecute"}) is None


async def _noexecute_event(api: kube.ApiClient, cluster: str) -> bool:
    found = await events(api, cluster, controller.REASON_ADDED)
    return any(f"{NOT_READY}:NoExecute added" in e["message"] for e in found)


async def _removed_both(api: kube.ApiClient, cluster: str) -> bool:
    found = await events(api, cluster, controller.REASON_REMOVED)
    messages = " ".join(e["message"] for e in found)
    return f"{NOT_READY}:NoSchedule removed" in messages and \
        f"{NOT_READY}:NoExecute removed" in messages


async def test_unknown_is_unreachable(env: environment.LocalEnvironment) -> None:
    async with env.client() as api, a_cluster(api) as name:
        await condition(api, name, groups.CONDITION_READY, "Unknown", manager=STATUS_MANAGER,
                        reason="ClusterStatusUnknown")
        async with cpkit.running_manager(api, ["clusterTaint"], failover=FAST):
            await until(api, name, [(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")])
            await condition(api, name, groups.CONDITION_READY, "False",
                            manager=STATUS_MANAGER, reason="ClusterNotReachable")
            # swapped at once: the cluster has been failing longer than the timeout
            await until(api, name, [(NOT_READY, "NoSchedule"), (NOT_READY, "NoExecute")])


def dns_policy(name: str, cluster: str) -> dict[str, Any]:
    return {
        "apiVersion": groups.CLUSTER_TAINT_POLICY.api_version,
        "kind": groups.CLUSTER_TAINT_POLICY.kind,
        "metadata": {"name": name},
        "spec": {
            "targetClusters": {"clusterNames": [cluster]},
            "addOnConditions": [{"conditionType": DNS, "operator": "In",
                                 "statusValues": ["False"]}],
            "removeOnConditions": [{"conditionType": DNS, "operator": "In",
                                    "statusValues": ["True"]}],
            "taints": [{"key": DNS_TAINT, "effect": "NoExecute"}],
        },
    }


async def test_the_agent_s_dns_condition_and_a_policy(
        env: environment.LocalEnvironment) -> None:
    policy_name = testkit.unique("dns-failure")
    async with env.client() as api, a_cluster(api) as name:
        await condition(api, name, groups.CONDITION_READY, "True", manager=STATUS_MANAGER,
                        reason="ClusterReady")
        await condition(api, name, DNS, "False", manager=AGENT_MANAGER,
                        reason="ResolutionFailed")
        try:
            async with cpkit.running_manager(api, ["clusterTaint"], failover=FAST) as running:
                # Ready True and no policy yet: nothing to add
                await until(api, name, [])
                # the policy arrives later: it re-queues the clusters it targets
                await api.create(resources.CLUSTER_TAINT_POLICIES, dns_policy(policy_name, name))
                added = await until(api, name, [(DNS_TAINT, "NoExecute")])
                assert "timeAdded" in added[0]
                found = await waiting.eventually(
                    lambda: events(api, name, controller.REASON_ADDED), timeout=20)
                assert f"ClusterTaintPolicy {policy_name}" in found[0]["message"]

                await condition(api, name, DNS, "True", manager=AGENT_MANAGER,
                                reason="ResolutionSucceeded")
                await until(api, name, [])
                # counted once the write's answer is back, which may come after the API
                # server already shows the change to this test's read
                assert await waiting.eventually(lambda: sample(
                    running, "clusterhealth_cluster_taint_changes_total",
                    {"key": DNS_TAINT, "effect": "NoExecute", "change": "removed"}) == 1,
                    timeout=20)
        finally:
            await api.delete(resources.CLUSTER_TAINT_POLICIES, policy_name, missing_ok=True)


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("effect", {"taints": [{"key": "k", "effect": "NoEvict"}]}, "spec.taints[0].effect"),
    ("duplicate", {"taints": [{"key": "k", "effect": "NoExecute"},
                              {"key": "k", "effect": "NoExecute", "value": "v"}]},
     "spec.taints[1]: Duplicate value"),
    ("no-taints", {"taints": []}, "spec.taints"),
    ("taints-missing", {"taints": None}, "spec.taints: Required value"),
    ("no-conditions", {"addOnConditions": None, "removeOnConditions": None},
     "at least one of addOnConditions or removeOnConditions must be set"),
    ("empty-conditions", {"addOnConditions": [], "removeOnConditions": []},
     "at least one of addOnConditions or removeOnConditions must be set"),
    ("operator", {"addOnConditions": [
        {"conditionType": DNS, "operator": "Equal", "statusValues": ["False"]}]},
     "spec.addOnConditions[0].operator"),
    ("status", {"addOnConditions": [
        {"conditionType": DNS, "operator": "In", "statusValues": ["false"]}]},
     "spec.addOnConditions[0].statusValues[0]"),
]
"""Edits of a valid policy (None: the field left out) and what the API server says."""


async def create_refused(api: kube.ApiClient, body: dict[str, Any]) -> errors.ApiError | None:
    """Create as ``kubectl create`` does (strict fields); the API server's refusal, if any."""
    try:
        await api.request("POST", resources.CLUSTER_TAINT_POLICIES.path(),
                          params={"fieldValidation": "Strict"}, body=body)
    except errors.ApiError as exc:
        return exc
    return None


async def test_bad_policies_are_refused_and_nothing_is_applied(
        env: environment.LocalEnvironment) -> None:
    good_name = testkit.unique("dns-failure")
    async with env.client() as api, a_cluster(api) as cluster:
        await condition(api, cluster, groups.CONDITION_READY, "True", manager=STATUS_MANAGER)
        await condition(api, cluster, DNS, "False", manager=AGENT_MANAGER)
        good = dns_policy(good_name, cluster)
        names = [good_name]
        try:
            async with cpkit.running_manager(api, ["clusterTaint"], failover=FAST):
                for why, edit, says in BAD:
                    name = testkit.unique("bad")
                    names.append(name)  # removed at the end should it be stored after all
                    spec = {**good["spec"], "taints": [{"key": f"bad-{why}",
                                                        "effect": "NoExecute"}], **edit}
                    body = {**good, "metadata": {"name": name},
                            "spec": {k: v for k, v in spec.items() if v is not None}}
                    error = await create_refused(api, body)
                    assert error is not None, f"{why}: accepted"
                    assert error.status == 422, why
                    assert says in str(error), (why, str(error))
                    with pytest.raises(errors.NotFound):
                        await api.get(resources.CLUSTER_TAINT_POLICIES, name)
                # a good policy after them: its taint alone shows the controller acted
                await api.create(resources.CLUSTER_TAINT_POLICIES, good)
                await until(api, cluster, [(DNS_TAINT, "NoExecute")])
        finally:
            for name in names:
                await api.delete(resources.CLUSTER_TAINT_POLICIES, name, missing_ok=True)
