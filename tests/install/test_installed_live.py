"""Every chart installed with helm onto clusters whose Nodes run containers (needs root).

The fleet (``conftest.py``) is installed as docs/operations.md says, with the images
built from the Dockerfiles.  Here: every Pod Ready under the charts' defaults (and
never restarted), what each NOTES.txt says checked against the clusters (and every
command it prints run), ``/metrics`` answering where each ServiceMonitor points,
every leader-elected component handing its Lease over when its leader's Pod is
deleted, and the MCI provider's member identity reading Services and nothing more.
"""

from __future__ import annotations

import asyncio
import base64
import re
import shlex
import time
from typing import Any

import installkit as kit
import pytest
import yaml

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config, errors, resources
from clusterhealth_localenv import fleet, images

pytestmark = pytest.mark.timeout(2400)  # the first test pays for the fleet (a cold image build)
CP = kit.CP
NAMESPACE = kit.NAMESPACE


async def test_every_pod_is_ready_under_the_charts_defaults(
        installed_fleet: fleet.Fleet) -> None:
    """Two replicas of each controller, an agent per Node, all Ready, none restarted, each
    running the image built from the Dockerfile (loaded, never pulled)."""
    expected_image = images.docker_name(installed_fleet.built["clusterhealth"].reference)
    haproxy_image = images.docker_name(installed_fleet.built["clusterhealth-haproxy"].reference)
    seconds: dict[str, float] = {}
    for component in (*kit.CONTROL_PLANE_COMPONENTS, *kit.AGENTS):
        async with installed_fleet.env.client(component.cluster) as api:
            pods = await kit.component_pods(api, component)
        where = f"{component.cluster}/{component.name}"
        assert len(pods) == 2, f"{where}: {[p['metadata']['name'] for p in pods]}"
        assert all(fleet.pod_ready(p) for p in pods), where
        assert set(kit.restarts(pods).values()) == {0}, (where, kit.restarts(pods))
        if component.chart == "agent":  # one per Node
            nodes = installed_fleet.env.node_cluster(component.cluster).node_names
            assert sorted(p["spec"]["nodeName"] for p in pods) == nodes
        for pod in pods:
            for container in pod["spec"]["containers"]:
                assert container["imagePullPolicy"] == "Never"
            images_run = {s["name"]: s["image"] for s in pod["status"]["containerStatuses"]}
            assert images_run[component.container or ""] == expected_image, images_run
            if component.chart == "mci-provider":
                assert images_run["haproxy"] == haproxy_image
            started = min(_time(s["state"]["running"]["startedAt"])
                          for s in pod["status"]["containerStatuses"])
            ready = _time(kit.condition(pod, "Ready")["lastTransitionTime"])  # type: ignore[index]
            seconds[pod["metadata"]["name"]] = ready - started
    print("container start -> Ready, seconds:",
          ", ".join(f"{k} {v:.0f}" for k, v in sorted(seconds.items())))


def _time(text: str) -> float:
    return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ"))


RELEASES = (
    ("clusterhealth-crds", CP, None),
    ("clusterhealth-controlplane", CP, NAMESPACE),
    ("clusterhealth-remedy", CP, NAMESPACE),
    ("clusterhealth-mci-provider", CP, NAMESPACE),
    ("clusterhealth-mci-provider", "member1", NAMESPACE),  # target=member
    ("clusterhealth-agent-rbac-member1", CP, "karmada-cluster"),
    ("clusterhealth-agent", "member1", NAMESPACE),
)


async def test_what_each_notes_says_is_true(installed_fleet: fleet.Fleet) -> None:
    """Each release's NOTES: its claims checked in the clusters, its commands run."""
    notes = {(release, cluster): await installed_fleet.notes(release, cluster, namespace)
             for release, cluster, namespace in RELEASES}
    f = installed_fleet
    async with f.env.client() as cp, f.env.client("member1") as member:
        await _crds_notes(f, cp, notes["clusterhealth-crds", CP])
        await _controlplane_notes(cp, notes["clusterhealth-controlplane", CP])
        await _replicas_notes(cp, "clusterhealth-remedy", notes["clusterhealth-remedy", CP])
        await _mci_notes(f, cp, notes["clusterhealth-mci-provider", CP])
        await _mci_member_notes(cp, member, notes["clusterhealth-mci-provider", "member1"])
        await _agent_rbac_notes(cp, notes["clusterhealth-agent-rbac-member1", CP])
        text = notes["clusterhealth-agent", "member1"]
        assert f"clusterhealth-agent for cluster member1 is installed in {NAMESPACE}" in text
        assert (f"Secret {NAMESPACE}/clusterhealth-agent-karmada-kubeconfig (key kubeconfig)"
                in text)
        await member.get(resources.SECRETS, "clusterhealth-agent-karmada-kubeconfig",
                         namespace=NAMESPACE)
    for release, cluster, _ in RELEASES:
        await _run_commands(f, notes[release, cluster], cluster)


async def _crds_notes(f: fleet.Fleet, cp: kube.ApiClient, text: str) -> None:
    listed = set(re.findall(r"[a-z]+\.[a-z]+\.karmada\.io", text))
    shipped = {yaml.safe_load(p.read_text())["metadata"]["name"]
               for p in (fleet.REPO / "charts/clusterhealth-crds/crds").glob("*.yaml")}
    installed = {c["metadata"]["name"] for c in (await cp.list(resources.CRDS))["items"]}
    assert listed == shipped and shipped <= installed, (listed, shipped)
    everything = (await f.kubectl(CP, "get", "clusterhealth")).stdout
    assert "cluster.cluster.karmada.io/member1" in everything, everything


async def _replicas_notes(cp: kube.ApiClient, name: str, text: str) -> None:
    """"... (2 replica(s), one leads)": the Deployment's replicas and its Lease's holder."""
    replicas = int(re.search(r"\((\d+) replica\(s\)", text).group(1))  # type: ignore[union-attr]
    deployment = await cp.get(resources.DEPLOYMENTS, name, namespace=NAMESPACE)
    assert deployment["spec"]["replicas"] == replicas == 2
    assert deployment["status"]["readyReplicas"] == replicas
    holder = await kit.lease_holder(cp, name)
    pods = (await cp.list(resources.PODS, namespace=NAMESPACE))["items"]
    assert holder in {p["metadata"]["name"] for p in pods}, holder


async def _controlplane_notes(cp: kube.ApiClient, text: str) -> None:
    for name, what in (("clusterhealth-controlplane-controller-manager", "controller manager"),
                       ("clusterhealth-controlplane-scheduler", "scheduler")):
        assert name in text
        await _replicas_notes(cp, name, text[text.index(f"the {what} ("):])
    match = re.search(r"webhook \((\d+) replica\(s\), failurePolicy (\w+)\)", text)
    assert match is not None, text
    webhook = await cp.get(resources.DEPLOYMENTS, "clusterhealth-controlplane-webhook",
                           namespace=NAMESPACE)
    assert webhook["status"]["readyReplicas"] == int(match.group(1))
    hooks = await cp.get(resources.Resource(
        "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration", namespaced=False), "clusterhealth-controlplane-webhook")
    assert {h["failurePolicy"] for h in hooks["webhooks"]} == {match.group(2)}
    seconds = dict(re.findall(r"cluster\.karmada\.io/([a-z-]+) \((\d+)s\)", text))
    assert seconds == {"not-ready": "300", "unreachable": "300"}, text
    # "adds NoExecute tolerations ... to policies without them": through the API server.
    policy = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
              "metadata": {"name": "notes-webhook", "namespace": "default"},
              "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                              "name": "none"}],
                       "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}}}
    made = await cp.create(resources.PROPAGATION_POLICIES, policy, namespace="default")
    try:
        tolerations = made["spec"]["placement"]["clusterTolerations"]
        assert {(t["key"].rsplit("/", 1)[1], t["effect"], t["tolerationSeconds"])
                for t in tolerations} == {("not-ready", "NoExecute", 300),
                                          ("unreachable", "NoExecute", 300)}
    finally:
        await cp.delete(resources.PROPAGATION_POLICIES, "notes-webhook", namespace="default")


async def _mci_notes(f: fleet.Fleet, cp: kube.ApiClient, text: str) -> None:
    await _replicas_notes(cp, "clusterhealth-mci-provider", text)
    assert "IngressClass clusterhealth" in text
    await cp.get(resources.Resource("networking.k8s.io", "v1", "ingressclasses",
                                    "IngressClass", namespaced=False), "clusterhealth")
    match = re.search(r"Service (\S+), port (\d+)", text)
    assert match is not None and "HAProxy runs in every pod" in text, text
    service = await cp.get(resources.SERVICES, match.group(1), namespace=NAMESPACE)
    assert [p["port"] for p in service["spec"]["ports"]] == [int(match.group(2))]
    # "each programmed by its own replica": every pod's HAProxy serves the MCI, and so does
    # the Service (its ClusterIP, reached through a Node's kube-proxy).
    pods = await f.haproxy_pods()
    addresses = [p["status"]["podIP"] for p in pods]
    assert len(addresses) == 2
    for address in [*addresses, service["spec"]["clusterIP"]]:
        async def answers(where: str = address) -> bool:
            status, body = await asyncio.to_thread(
                kit.http_get, f"http://{where}:{match.group(2)}{fleet.WEB_PATH}",
                5.0, {"Host": fleet.WEB_HOST})
            return status == 200 and body.startswith(("member1/", "member2/"))
        await kit.wait_for(f"the MCI served through {address}", answers, timeout=60)
    for pod in pods:
        assert {c["name"] for c in pod["spec"]["containers"]} == {"mci-provider", "haproxy"}


async def _mci_member_notes(cp: kube.ApiClient, member: kube.ApiClient, text: str) -> None:
    match = re.search(r"ClusterRole/ClusterRoleBinding (\S+) .*\n\s*bound to ServiceAccount "
                      r"(\S+)/(\S+), whose token is in Secret (\S+)/(\S+)\.", text)
    assert match is not None, text
    binding = await member.get(resources.CLUSTER_ROLE_BINDINGS, match.group(1))
    assert binding["roleRef"]["name"] == match.group(1)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": match.group(3),
                                    "namespace": match.group(2)}]
    # the token the NOTES name is the one the control plane's credential holds (step 5)
    token = await member.get(resources.SECRETS, match.group(5), namespace=match.group(4))
    assert "clusterhealth-mci-credentials" in text
    credential = await cp.get(resources.SECRETS, "member1",
                              namespace="clusterhealth-mci-credentials")
    assert credential["data"]["token"] == token["data"]["token"]


async def _agent_rbac_notes(cp: kube.ApiClient, text: str) -> None:
    match = re.search(r'ClusterRole/ClusterRoleBinding "(\S+)" bound to\s+ServiceAccount '
                      r'"(\S+)/(\S+)"', text)
    assert match is not None, text
    assert match.group(1) == "clusterhealth-agent:member1"
    binding = await cp.get(resources.CLUSTER_ROLE_BINDINGS, match.group(1))
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": match.group(3),
                                    "namespace": match.group(2)}]
    assert '"Install", steps 2 and 3' in text
    readme = (fleet.REPO / fleet.AGENT_README).read_text()
    assert all(title in readme for title in ("## Install", "### 2. A kubeconfig",
                                             "### 3. In the member"))


async def _run_commands(f: fleet.Fleet, text: str, cluster: str) -> None:
    """Every ``kubectl`` line of a NOTES runs, against the cluster the release is in.

    A line piped on (``| base64 -d > token``) runs up to its pipe; a line naming a
    placeholder (``<cluster>``) or continued on the next is the user's to fill in.
    """
    for line in text.splitlines():
        command = line.split("#", 1)[0].split(" | ", 1)[0].strip()
        if not command.startswith("kubectl ") or "<cluster>" in command or command.endswith(
                "\\"):
            continue
        words = shlex.split(command.replace("--kubeconfig <control-plane>",
                                            "--context clusterhealth"))
        if "--context" not in words:
            words[1:1] = ["--context", f.context(cluster)]
        ran = await f.run(words, check=False)
        assert ran.code == 0, f"NOTES command {command!r}: {ran.stderr}"
        if "lease" in words:
            assert re.search(r"\S+_[0-9a-f]+", ran.stdout), ran.stdout  # a holder


EXPECTED_TARGETS = {
    "controlplane": {"clusterhealth-controlplane-controller-manager",
                     "clusterhealth-controlplane-scheduler", "clusterhealth-controlplane-webhook"},
    "remedy": {"clusterhealth-remedy"},
    "mci-provider": {"clusterhealth-mci-provider"},
    "agent": {"clusterhealth-agent"},
}


async def test_metrics_answer_where_each_servicemonitor_points(
        installed_fleet: fleet.Fleet) -> None:
    """Render each chart's ServiceMonitor, resolve its port through the Services and their
    EndpointSlices as Prometheus would, and GET every target from this machine."""
    charts = {c.chart: c for c in (*kit.CONTROL_PLANE_COMPONENTS, *kit.AGENTS)}
    by_prefix = {c.name: c for c in (*kit.CONTROL_PLANE_COMPONENTS, *kit.AGENTS)}
    for chart, component in charts.items():
        clusters = [component.cluster] if chart != "agent" else list(kit.MEMBERS)
        for cluster in clusters:
            targets = await kit.servicemonitor_targets(
                installed_fleet, kit.Component(component.name, chart, component.release,
                                               cluster, component.metric))
            owners = {max((n for n in by_prefix if t.pod.startswith(n + "-")), key=len)
                      for t in targets}
            assert owners == EXPECTED_TARGETS[chart], (chart, targets)
            assert len(targets) == 2 * len(owners), targets  # every replica, once
            for target in targets:
                owner = by_prefix[max((n for n in by_prefix if target.pod.startswith(n + "-")),
                                      key=len)]
                body = await kit.scrape(target.url)
                assert kit.samples(body, owner.metric) or f"# TYPE {owner.metric}" in body \
                    or f"# HELP {owner.metric}" in body, (target, owner.metric)


async def test_each_leader_hands_over_when_its_pod_is_deleted(
        installed_fleet: fleet.Fleet) -> None:
    """Delete the Lease holder's Pod of every elected control-plane component at once: the
    other replica takes each Lease (it was Ready, standing by), and says so in /metrics."""
    elected = [c for c in kit.CONTROL_PLANE_COMPONENTS if c.elected]
    async with installed_fleet.env.client() as cp:
        results = await asyncio.gather(*(_hand_over(cp, c) for c in elected))
        for component in elected:
            await kit.wait_for(f"{component.name} back to 2 Ready replicas",
                               lambda c=component: _ready_replicas(cp, c.name, 2), timeout=180)
    print("lease handed over after:", ", ".join(f"{c.name} {s:.1f} s"
                                                for c, s in zip(elected, results, strict=True)))


async def _hand_over(cp: kube.ApiClient, component: kit.Component) -> float:
    old = await kit.lease_holder(cp, component.name)
    pods = await kit.component_pods(cp, component)
    standby = [p for p in pods if p["metadata"]["name"] != old]
    assert len(standby) == 1 and fleet.pod_ready(standby[0]), (old, pods)
    began = time.monotonic()
    await cp.delete(resources.PODS, old, namespace=NAMESPACE)

    async def moved() -> str:
        holder = await kit.lease_holder(cp, component.name)
        return holder if holder and holder != old else ""

    holder = await kit.wait_for(f"{component.name}'s Lease leaving {old}", moved, timeout=60,
                                interval=0.2)
    took = time.monotonic() - began
    assert holder == standby[0]["metadata"]["name"], (holder, standby)
    url = (f"http://{standby[0]['status']['podIP']}:"
           f"{standby[0]['spec']['containers'][0]['ports'][0]['containerPort']}/metrics")

    async def says_leading() -> bool:
        # the gauge is set once the new holder's Lease write has returned to it: a loaded
        # machine can show the Lease to us first
        body = await kit.scrape(url)
        return [v for _, v in kit.samples(body, component.metric)] == [1.0]
    await kit.wait_for(f"{component.name}'s new leader saying so in /metrics", says_leading,
                       timeout=30, interval=0.2)
    return took


async def _ready_replicas(cp: kube.ApiClient, name: str, count: int) -> bool:
    deployment = await cp.get(resources.DEPLOYMENTS, name, namespace=NAMESPACE)
    status = deployment.get("status") or {}
    return bool(status.get("readyReplicas") == count == status.get("replicas")
                and status.get("updatedReplicas") == count)


async def test_the_mci_providers_member_identity_reads_services_only(
        installed_fleet: fleet.Fleet) -> None:
    """``target=member`` in a member: the README's ServiceAccount and token may list Services
    and EndpointSlices there, and nothing else (the provider's member credential)."""
    env = installed_fleet.env
    for member in env.members:
        async with env.client(member) as admin:
            secret = await admin.get(resources.SECRETS, "clusterhealth-mci-provider-token",
                                     namespace=NAMESPACE)
        token = _decoded(secret, "token")
        credentials = config.Credentials(server=env.servers[member].url, ca_data=env.ca.cert_pem,
                                         token=token, source="mci-member-token")
        async with kube.ApiClient(credentials) as identity:
            assert (await identity.list(resources.SERVICES))["items"]
            assert (await identity.list(resources.ENDPOINT_SLICES))["items"]
            for forbidden in (resources.PODS, resources.SECRETS, resources.NODES):
                with pytest.raises(errors.Forbidden):
                    await identity.list(forbidden)


def _decoded(secret: dict[str, Any], key: str) -> str:
    return base64.b64decode(secret["data"][key]).decode()
