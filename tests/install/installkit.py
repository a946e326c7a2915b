"""What the tests of the installed charts read: Pods, Leases, ServiceMonitor targets, metrics.

Every read goes to the real thing: the API servers (admin clients), the Pods' own
``/metrics`` at their Pod IPs (routed from this machine to the Nodes), HAProxy
through its Pod IP.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import yaml
from prometheus_client import parser

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment, fleet

CP = environment.CONTROL_PLANE
NAMESPACE = fleet.NAMESPACE
MEMBERS = ("member1", "member2")


@dataclasses.dataclass(frozen=True)
class Component:
    """One workload of a chart: where it runs, its Lease, and a metric it always serves."""

    name: str
    """The Deployment or DaemonSet (and its Lease, when leader-elected)."""
    chart: str
    release: str
    cluster: str
    metric: str
    elected: bool = True
    container: str | None = None


CONTROL_PLANE_COMPONENTS = (
    Component("clusterhealth-controlplane-controller-manager", "controlplane",
              "clusterhealth-controlplane", CP, "clusterhealth_controlplane_is_leader",
              container="controller-manager"),
    Component("clusterhealth-controlplane-scheduler", "controlplane",
              "clusterhealth-controlplane", CP, "clusterhealth_scheduler_is_leader",
              container="scheduler"),
    Component("clusterhealth-controlplane-webhook", "controlplane", "clusterhealth-controlplane",
              CP, "clusterhealth_webhook_admission_requests_total", elected=False,
              container="webhook"),
    Component("clusterhealth-remedy", "remedy", "clusterhealth-remedy", CP,
              "clusterhealth_remedy_is_leader", container="remedy"),
    Component("clusterhealth-mci-provider", "mci-provider", "clusterhealth-mci-provider", CP,
              "clusterhealth_mci_is_leader", container="mci-provider"),
)
AGENTS = tuple(Component("clusterhealth-agent", "agent", "clusterhealth-agent", member,
                         "clusterhealth_agent_is_leader", container="agent")
               for member in MEMBERS)


def selector(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


async def component_pods(api: kube.ApiClient, component: Component) -> list[dict[str, Any]]:
    """The Pods of a component (its chart's selector labels and name)."""
    instance = component.release
    chart_name = f"clusterhealth-{component.chart}"
    pods = (await api.list(resources.PODS, namespace=NAMESPACE, label_selector=selector({
        "app.kubernetes.io/name": chart_name, "app.kubernetes.io/instance": instance})))["items"]
    return [p for p in pods if p["metadata"]["name"].startswith(component.name + "-")
            and not p["metadata"].get("deletionTimestamp")]


async def lease_holder(api: kube.ApiClient, name: str, namespace: str = NAMESPACE) -> str:
    """The Pod holding the Lease (its identity is ``<pod>_<suffix>``), or ''."""
    lease = await api.get(resources.LEASES, name, namespace=namespace)
    holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
    return holder.rsplit("_", 1)[0] if "_" in holder else holder


def http_get(url: str, timeout: float = 5.0, headers: Mapping[str, str] | None = None
             ) -> tuple[int, str]:
    """GET from this machine (Pod IPs are routed to their Nodes)."""
    request = urllib.request.Request(url, headers=dict(headers or {}))
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return int(response.status), response.read().decode(errors="replace")


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """Every sample of metric ``name`` in an exposition: (labels, value)."""
    found = []
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found.append((dict(sample.labels), float(sample.value)))
    return found


async def scrape(url: str) -> str:
    status, body = await asyncio.to_thread(http_get, url)
    assert status == 200, f"{url}: HTTP {status}"
    return body


@dataclasses.dataclass(frozen=True)
class Target:
    """What Prometheus would scrape for a ServiceMonitor endpoint: a Pod's address and port."""

    service: str
    pod: str
    url: str


async def servicemonitor_targets(the_fleet: fleet.Fleet, component: Component
                                 ) -> list[Target]:
    """Render the chart's ServiceMonitor (as installed, plus ``serviceMonitor.enabled``) and
    resolve it as the Prometheus Operator does: the Services its selector matches in its
    namespaces, their port named by the endpoint, and that port of every ready endpoint."""
    args = ["template", component.release, f"charts/{component.chart}", "--namespace",
            NAMESPACE, "--set", "serviceMonitor.enabled=true",
            "--show-only", "templates/servicemonitor.yaml"]
    if component.chart == "agent":
        args += ["--set", f"clusterName={component.cluster}"]
    monitor = yaml.safe_load((await the_fleet.run(["helm", *args])).stdout)
    assert monitor["kind"] == "ServiceMonitor"
    spec = monitor["spec"]
    assert spec["namespaceSelector"]["matchNames"] == [NAMESPACE]
    port_names = {e["port"] for e in spec["endpoints"]}
    paths = {e.get("path", "/metrics") for e in spec["endpoints"]}
    assert paths == {"/metrics"}, paths
    targets = []
    async with the_fleet.env.client(component.cluster) as api:
        services = (await api.list(resources.SERVICES, namespace=NAMESPACE,
                                   label_selector=selector(spec["selector"]["matchLabels"])
                                   ))["items"]
        for service in services:
            named = [p for p in service["spec"]["ports"] if p.get("name") in port_names]
            if not named:
                continue
            slices = (await api.list(resources.ENDPOINT_SLICES, namespace=NAMESPACE,
                                     label_selector="kubernetes.io/service-name="
                                     + service["metadata"]["name"]))["items"]
            for item in slices:
                ports = {p.get("name"): p["port"] for p in item.get("ports") or []}
                for endpoint in item.get("endpoints") or []:
                    if not (endpoint.get("conditions") or {}).get("ready"):
                        continue
                    pod = (endpoint.get("targetRef") or {}).get("name", "")
                    for port in named:
                        targets.append(Target(service["metadata"]["name"], pod,
                                              f"http://{endpoint['addresses'][0]}:"
                                              f"{ports[port['name']]}/metrics"))
    return targets


async def wait_for(what: str, check: Any, timeout: float = 60.0, interval: float = 0.5) -> Any:
    """``check()``'s first truthy result, or an AssertionError naming ``what``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = await check()
        except Exception as exc:
            last = exc
        if last and not isinstance(last, Exception):
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s (last: {last!r})")
        await asyncio.sleep(interval)


def condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


async def cluster_condition(api: kube.ApiClient, cluster: str, kind: str = fleet.DNS_CONDITION
                            ) -> dict[str, Any] | None:
    return condition(await api.get(resources.CLUSTERS, cluster), kind)


async def remedy_actions(api: kube.ApiClient, cluster: str) -> list[str]:
    obj = await api.get(resources.CLUSTERS, cluster)
    return list((obj.get("status") or {}).get("remedyActions") or [])


async def blocked(api: kube.ApiClient) -> list[str]:
    obj = await api.get(resources.MULTI_CLUSTER_INGRESSES, "web", namespace=fleet.SHOP)
    return sorted((obj.get("status") or {}).get("trafficBlockClusters") or [])


def restarts(pods: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    return {p["metadata"]["name"]: sum(int(c.get("restartCount") or 0)
                                       for c in (p.get("status") or {}).get(
                                           "containerStatuses") or [])
            for p in pods}


class Watcher:
    """Every version of one object seen through a watch, while running (a background task)."""

    def __init__(self, api: kube.ApiClient, resource: resources.Resource, name: str,
                 namespace: str | None = None) -> None:
        self.api = api
        self.resource = resource
        self.name = name
        self.namespace = namespace
        self.versions: list[dict[str, Any]] = []
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Watcher:
        first = await self.api.get(self.resource, self.name, namespace=self.namespace)
        self.versions.append(first)
        self._task = asyncio.create_task(self._run(first["metadata"]["resourceVersion"]))
        return self

    async def _run(self, version: str) -> None:
        while True:
            async for event in self.api.watch(
                    self.resource, namespace=self.namespace, resource_version=version,
                    field_selector=f"metadata.name={self.name}"):
                obj = event.object
                version = obj["metadata"]["resourceVersion"]
                if event.type in ("ADDED", "MODIFIED"):
                    self.versions.append(obj)

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


def statuses(versions: Sequence[Mapping[str, Any]], kind: str) -> list[tuple[str, str]]:
    """(status, lastTransitionTime) of condition ``kind`` in every version."""
    found = []
    for obj in versions:
        cond = condition(obj, kind)
        found.append((str(cond.get("status")), str(cond.get("lastTransitionTime")))
                     if cond else ("absent", ""))
    return found


Snapshot = dict[str, set[tuple[str, str, str]]]
"""Per cluster: every object as (resource, namespace, name)."""


async def snapshot(the_fleet: fleet.Fleet) -> Snapshot:
    """Every object of every listable resource in every cluster (Events left out)."""
    found: Snapshot = {}
    for cluster in [environment.CONTROL_PLANE, *the_fleet.env.members]:
        names = (await the_fleet.kubectl(cluster, "api-resources", "--verbs=list",
                                         "-o", "name")).stdout.split()
        names = [n for n in names if n not in ("events", "events.events.k8s.io",
                                               "componentstatuses")]
        listed = json.loads((await the_fleet.kubectl(
            cluster, "get", ",".join(names), "-A", "-o", "json")).stdout)
        found[cluster] = {(_resource(item), item["metadata"].get("namespace") or "",
                           item["metadata"]["name"]) for item in listed["items"]}
    return found


def _resource(item: dict[str, Any]) -> str:
    group = item["apiVersion"].rsplit("/", 1)[0] if "/" in item["apiVersion"] else ""
    return f"{item['kind']}.{group}" if group else item["kind"]
