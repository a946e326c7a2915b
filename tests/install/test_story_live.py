"""The story on real Pods, on the fleet installed by helm (needs root).

- member1's CoreDNS scaled to 0: the agent Pods fail their probe, the Cluster's
  ``ServiceDomainNameResolutionReady`` turns False, ``TrafficControl``, HAProxy (the
  MCI provider's sidecar) drains member1; CoreDNS back: all cleared; requests flow
  through the HAProxy Pod all along and none fails;
- the agents' leader Pod deleted: another Pod takes the Lease and keeps reporting;
- a Node's kubelet stopped: the leader decides from the Ready Nodes only;
- ``helm upgrade`` of the agent rolls the DaemonSet without the condition flapping;
  of the remedy controller, hands over without a missed reaction;
- the agent's Pods wait for their kubeconfig Secret, as its NOTES say.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import installkit as kit
import pytest

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import conditions, dnsstory, fleet, nodenet

pytestmark = pytest.mark.timeout(2400)  # the first test pays for the fleet (a cold image build)
NAMESPACE = kit.NAMESPACE
AGENT_LEASE = "clusterhealth-agent"
DNS = fleet.DNS_CONDITION


async def test_dns_outage_drains_member1_and_no_request_fails(
        installed_fleet: fleet.Fleet) -> None:
    story = dnsstory.DnsStory(installed_fleet, say=print)
    await story.start_traffic()
    try:
        phase = await story.run()
    finally:
        await story.stop_traffic()
    assert story.traffic is not None
    began = phase.began
    assert story.traffic.failures == [], (
        [f"{t - began:+.1f} s" for t in story.traffic.failed_at[:20]],
        story.traffic.failures[:10], phase.milestones)
    marks = [what for _, what in phase.milestones]
    assert any("every agent Pod failed its probe" in m for m in marks)
    drained_for = next(m for m in marks if m.startswith("requests sent in the 5 s since"))
    assert drained_for.endswith("member1 0"), drained_for
    assert int(drained_for.split("member2 answered ")[1].split(",")[0]) > 0
    assert phase.answered["member1"] > 0 and phase.answered["member2"] > 0
    print(f"story: {phase.seconds:.1f} s, answered {phase.answered}, "
          f"{len(story.traffic.answers)} in all, 0 failed")


async def _agent_pods(api: kube.ApiClient) -> list[dict[str, Any]]:
    return await kit.component_pods(api, kit.AGENTS[0])


async def _daemonset_settled(api: kube.ApiClient) -> bool:
    ds = await api.get(resources.Resource("apps", "v1", "daemonsets", "DaemonSet",
                                          namespaced=True), "clusterhealth-agent",
                       namespace=NAMESPACE)
    status = ds.get("status") or {}
    return bool(status.get("observedGeneration") == ds["metadata"]["generation"]
                and status.get("numberReady") == status.get("desiredNumberScheduled")
                == status.get("updatedNumberScheduled") == 2)


async def test_agent_leader_deleted_another_takes_the_lease_and_keeps_reporting(
        installed_fleet: fleet.Fleet) -> None:
    env = installed_fleet.env
    async with env.client("member1") as member, env.client() as cp:
        await kit.wait_for("member1's agents settled", lambda: _daemonset_settled(member),
                           timeout=120)
        before = await kit.cluster_condition(cp, "member1")
        assert before is not None and before["status"] == "True"
        old = await kit.lease_holder(member, AGENT_LEASE)
        deleted = time.time()
        await member.delete(resources.PODS, old, namespace=NAMESPACE)

        async def new_holder() -> dict[str, Any] | None:
            holder = await kit.lease_holder(member, AGENT_LEASE)
            pods = {p["metadata"]["name"]: p for p in await _agent_pods(member)}
            return pods.get(holder) if holder and holder != old else None

        leader = await kit.wait_for("another agent Pod holding the Lease", new_holder,
                                    timeout=60, interval=0.2)
        took = time.time() - deleted

        async def reported() -> bool:
            body = await kit.scrape(f"http://{leader['status']['podIP']}:10358/metrics")
            leading = kit.samples(body, "clusterhealth_agent_is_leader")
            last = kit.samples(body, "clusterhealth_agent_last_report_success_timestamp_seconds")
            return leading == [({"cluster": "member1"}, 1.0)] and bool(last) \
                and last[0][1] >= deleted
        await kit.wait_for("the new leader reporting to the control plane", reported,
                           timeout=60)
        after = await kit.cluster_condition(cp, "member1")
        assert after is not None
        assert (after["status"], after["lastTransitionTime"]) == (
            "True", before["lastTransitionTime"])
        await kit.wait_for("member1's agents settled again", lambda: _daemonset_settled(member),
                           timeout=120)
    print(f"agent Lease taken by {leader['metadata']['name']} {took:.1f} s after the delete")


async def _node_ready(api: kube.ApiClient, name: str) -> str:
    node = await api.get(resources.NODES, name)
    cond = kit.condition(node, "Ready")
    return str(cond["status"]) if cond else "missing"


async def _node_dns(api: kube.ApiClient, name: str) -> str:
    cond = kit.condition(await api.get(resources.NODES, name), DNS)
    return str(cond["status"]) if cond else "missing"


def _nft(pid: int, *words: str) -> str:
    return nodenet.in_namespace(pid, "nft", *words)


async def test_kubelet_stopped_the_leader_decides_from_the_ready_nodes_only(
        installed_fleet: fleet.Fleet) -> None:
    """Stop the kubelet of the Node without the leader: that Node turns NotReady while its
    agent Pod still runs and passes.  Then break DNS on the leader's Node only: with the
    default quorum (every Ready Node must fail) the Cluster turns False, so the passing
    NotReady Node was not counted."""
    env = installed_fleet.env
    cluster = env.node_cluster("member1")
    async with env.client("member1") as member, env.client() as cp:
        await kit.wait_for("member1's agents settled", lambda: _daemonset_settled(member),
                           timeout=120)
        holder = await kit.lease_holder(member, AGENT_LEASE)
        pods = {p["metadata"]["name"]: p for p in await _agent_pods(member)}
        leader_node = pods[holder]["spec"]["nodeName"]
        other = next(n for n in cluster.node_names if n != leader_node)
        dns_ip = cluster.plan.dns_service(cluster.index)
        init = cluster.node(leader_node).init_pid
        assert init is not None
        await cluster.stop_kubelet(other)
        broken = False
        try:
            await kit.wait_for(f"{other} NotReady",
                               lambda: _is(_node_ready(member, other), "Unknown", "False"),
                               timeout=60)
            assert await _node_dns(member, other) == "True"
            await asyncio.to_thread(_nft, init, "add", "table", "ip", "chk_test")
            broken = True
            await asyncio.to_thread(_nft, init, "add", "chain", "ip", "chk_test", "pre",
                                    "{ type filter hook prerouting priority -300 ; }")
            for proto in ("udp", "tcp"):
                await asyncio.to_thread(_nft, init, "add", "rule", "ip", "chk_test", "pre",
                                        "ip", "daddr", dns_ip, proto, "dport", "53", "drop")
            await kit.wait_for(f"{leader_node}'s agent failing",
                               lambda: _is(_node_dns(member, leader_node), "False"), timeout=60)
            # The NotReady Node's agent still runs and still resolves.
            assert await _node_dns(member, other) == "True"
            failed = await kit.wait_for(
                "member1 reported failing from its one Ready Node",
                lambda: _condition_is(cp, "False"), timeout=60)
            assert failed["message"].startswith("1/1 Ready nodes failing"), failed
            assert leader_node in failed["message"] and other not in failed["message"]
        finally:
            if broken:
                await asyncio.to_thread(_nft, init, "delete", "table", "ip", "chk_test")
            cluster.start_kubelet(other)
        await kit.wait_for(f"{other} Ready again", lambda: _is(_node_ready(member, other),
                                                               "True"), timeout=90)
        # True as soon as one Ready Node passes; both Nodes once the other's agent has
        # passed for its success threshold too
        await kit.wait_for("member1 healthy again, both Nodes Ready and passing",
                           lambda: _condition_is(cp, "True", "2/2 Ready nodes passing"),
                           timeout=90)
        await kit.wait_for("TrafficControl cleared",
                           lambda: _empty(kit.remedy_actions(cp, "member1")), timeout=60)


async def _is(value: Any, *wanted: str) -> bool:
    return await value in wanted


async def _empty(value: Any) -> bool:
    return not await value


async def _condition_is(cp: kube.ApiClient, status: str, message: str = ""
                        ) -> dict[str, Any] | None:
    cond = await kit.cluster_condition(cp, "member1")
    return cond if cond and cond["status"] == status and str(
        cond.get("message", "")).startswith(message) else None


async def test_agent_upgrade_rolls_the_daemonset_without_the_condition_flapping(
        installed_fleet: fleet.Fleet) -> None:
    """``helm upgrade`` with a changed value: every Pod replaced, node by node, the Lease
    handed over, and the Cluster's condition True in every version written meanwhile."""
    env = installed_fleet.env
    async with env.client("member1") as member, env.client() as cp:
        await kit.wait_for("member1 healthy", lambda: _condition_is(cp, "True"), timeout=90)
        await kit.wait_for("member1's agents settled", lambda: _daemonset_settled(member),
                           timeout=120)
        old_pods = {p["metadata"]["name"] for p in await _agent_pods(member)}
        async with kit.Watcher(cp, resources.CLUSTERS, "member1") as watched:
            began = time.monotonic()
            await installed_fleet.helm(
                "member1", "upgrade", "clusterhealth-agent", "charts/agent", "--namespace",
                NAMESPACE, "--reuse-values", "--set", "detectSuccessThreshold=8s")
            await installed_fleet.kubectl("member1", "-n", NAMESPACE, "rollout", "status",
                                          "daemonset/clusterhealth-agent", "--timeout=180s",
                                          timeout=200)
            await kit.wait_for("the rolled DaemonSet settled", lambda: _daemonset_settled(member),
                               timeout=120)
            rolled = time.monotonic() - began
            new_pods = await _agent_pods(member)
            names = {p["metadata"]["name"] for p in new_pods}

            async def new_leader() -> bool:
                return await kit.lease_holder(member, AGENT_LEASE) in names
            # a leader stopped without releasing the Lease is replaced one lease
            # duration later
            await kit.wait_for("a new Pod holding the agent's Lease", new_leader, timeout=60)
            await asyncio.sleep(10)  # the new leader's first reports
        assert not old_pods & names
        for pod in new_pods:
            assert "--detect-success-threshold=8s" in pod["spec"]["containers"][0]["args"]
    seen = kit.statuses(watched.versions, DNS)
    assert {status for status, _ in seen} == {"True"}, seen
    assert len({transition for _, transition in seen}) == 1, seen
    print(f"agent upgrade rolled in {rolled:.1f} s; {len(seen)} versions of member1, all True")


PROBE = "InstallUpgradeProbe"
WRITER = "install-tests"


async def test_remedy_upgrade_hands_over_without_a_missed_reaction(
        installed_fleet: fleet.Fleet) -> None:
    """While ``helm upgrade`` rolls the remedy controller (a new replica Ready before an old
    one stops, the Lease handed over), a condition flips again and again on member2: each
    flip gets its reaction (TrafficControl added, then removed)."""
    env = installed_fleet.env
    remedy = {"apiVersion": resources.REMEDIES.api_version, "kind": "Remedy",
              "metadata": {"name": "upgrade-probe"},
              "spec": {"clusterAffinity": {"clusterNames": ["member2"]},
                       "decisionMatches": [{"clusterConditionMatch": {
                           "conditionType": PROBE, "operator": "Equal",
                           "conditionStatus": "False"}}],
                       "actions": ["TrafficControl"]}}
    reactions: list[tuple[str, float]] = []
    async with env.client() as cp:
        await conditions.set_condition(cp, "member2", PROBE, "True", manager=WRITER)
        await cp.create(resources.REMEDIES, remedy)
        old_log: asyncio.Task[fleet.Ran] | None = None
        try:
            old_leader = await kit.lease_holder(cp, "clusterhealth-remedy")
            # its log until it stops: how it let the Lease go
            old_log = asyncio.create_task(installed_fleet.kubectl(
                "control-plane", "logs", "-f", old_leader, "--namespace", NAMESPACE,
                check=False, timeout=420))
            upgrade = asyncio.create_task(installed_fleet.helm(
                "control-plane", "upgrade", "clusterhealth-remedy", "charts/remedy",
                "--namespace", NAMESPACE, "--reuse-values", "--set", "workers=3"))
            began = time.monotonic()

            async def rolled() -> bool:
                deployment = await cp.get(resources.DEPLOYMENTS, "clusterhealth-remedy",
                                          namespace=NAMESPACE)
                st = deployment.get("status") or {}
                return bool(deployment["metadata"]["generation"] > 1
                            and st.get("observedGeneration") == deployment["metadata"][
                                "generation"]
                            and st.get("updatedReplicas") == st.get("replicas") == 2
                            and st.get("readyReplicas") == 2)

            value = "False"
            while not (upgrade.done() and await rolled()) or len(reactions) < 4:
                flipped = time.monotonic()
                await conditions.set_condition(cp, "member2", PROBE, value, manager=WRITER)
                wanted = ["TrafficControl"] if value == "False" else []
                await kit.wait_for(f"the reaction to {PROBE}={value}",
                                   lambda w=wanted: _actions_are(cp, "member2", w), timeout=45,
                                   interval=0.1)
                reactions.append((value, time.monotonic() - flipped))
                value = "True" if value == "False" else "False"
                if time.monotonic() - began > 300:
                    raise AssertionError("the remedy controller's rollout did not finish")
            await upgrade
            pods = (await cp.list(resources.PODS, namespace=NAMESPACE, label_selector=(
                "app.kubernetes.io/name=clusterhealth-remedy")))["items"]
            current = {p["metadata"]["name"] for p in pods
                       if not p["metadata"].get("deletionTimestamp")}
            assert old_leader not in current, (old_leader, current)

            # The rollout counts done once the old Pod is terminating; it holds the Lease
            # until its work has stopped (at most the stop timeout), then releases it.
            async def handed_over() -> str:
                holder = await kit.lease_holder(cp, "clusterhealth-remedy")
                return holder if holder in current else ""
            await kit.wait_for("the Lease held by a new Pod", handed_over, timeout=60)
            stopped = (await asyncio.wait_for(old_log, 120)).stdout
            for failure in ("did not stop", "could not release", "release timed out"):
                assert failure not in stopped, stopped[-3000:]
        finally:
            if old_log is not None:
                old_log.cancel()
            await cp.delete(resources.REMEDIES, "upgrade-probe", missing_ok=True)
            await conditions.remove_conditions(cp, "member2", [PROBE], manager=WRITER)
            await kit.wait_for("member2's actions cleared",
                               lambda: _actions_are(cp, "member2", []), timeout=45)
    print("remedy upgrade: reactions (value, seconds):",
          ", ".join(f"{v} {s:.1f}" for v, s in reactions))


async def _actions_are(cp: kube.ApiClient, cluster: str, wanted: list[str]) -> bool:
    return await kit.remedy_actions(cp, cluster) == wanted


async def test_agent_pods_wait_for_their_kubeconfig_secret(installed_fleet: fleet.Fleet) -> None:
    """The agent's NOTES: "the pods stay in ContainerCreating until it exists"."""
    env = installed_fleet.env
    name = "clusterhealth-agent-karmada-kubeconfig"
    async with env.client("member2") as member:
        secret = await member.get(resources.SECRETS, name, namespace=NAMESPACE)
        holder = await kit.lease_holder(member, AGENT_LEASE)
        standby = next(p for p in await _agent_pods(member) if p["metadata"]["name"] != holder)
        await member.delete(resources.SECRETS, name, namespace=NAMESPACE)
        restored = False
        try:
            await member.delete(resources.PODS, standby["metadata"]["name"], namespace=NAMESPACE)

            async def waiting_pod() -> dict[str, Any] | None:
                for pod in await _agent_pods(member):
                    states = [s.get("state", {}) for s in
                              (pod.get("status") or {}).get("containerStatuses") or []]
                    if pod["metadata"]["name"] != holder and pod["status"].get(
                            "phase") == "Pending" and all(
                            (s.get("waiting") or {}).get("reason") == "ContainerCreating"
                            for s in states):
                        return pod
                return None

            pod = await kit.wait_for("a new agent Pod waiting", waiting_pod, timeout=60)
            await asyncio.sleep(5)
            still = {p["metadata"]["name"]: p for p in await _agent_pods(member)}
            assert still[pod["metadata"]["name"]]["status"]["phase"] == "Pending"
            body = {k: secret[k] for k in ("type", "data")}
            body["metadata"] = {"name": name, "namespace": NAMESPACE}
            await member.create(resources.SECRETS, body, namespace=NAMESPACE)
            restored = True
            await kit.wait_for("member2's agents settled", lambda: _daemonset_settled(member),
                               timeout=180)
        finally:
            if not restored:
                body = {k: secret[k] for k in ("type", "data")}
                body["metadata"] = {"name": name, "namespace": NAMESPACE}
                await member.create(resources.SECRETS, body, namespace=NAMESPACE)
