"""The cluster-status controller against real API servers (members really stopped and started).

A private environment (one member, ``csm1``) so that stopping its API server
disturbs no other test; timers are shortened through ``options.ClusterHealth``.
The answers a real API server cannot be made to give on demand (``/readyz``
404, ``/healthz`` 500) come from a tiny loopback aiohttp server standing in
as a member's ``apiEndpoint``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import time
from collections.abc import AsyncIterator
from typing import Any

import cpkit
import prometheus_client
import pytest
from aiohttp import web

import testkit
from clusterhealth_controlplane import options
from clusterhealth_controlplane.clusterstatus import controller, decision
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment, waiting

MEMBER = "csm1"
QUICK = options.ClusterHealth(update_frequency=0.5, success_threshold=3.0, failure_threshold=3.0,
                              monitor_grace_period=4.0, probe_timeout=2.0)
NAMES = ("clusterStatus",)


@pytest.fixture(scope="module")
async def cs_env() -> AsyncIterator[environment.LocalEnvironment]:
    config = environment.EnvironmentConfig(members=(MEMBER,))
    async with environment.LocalEnvironment(config) as local:
        yield local


@pytest.fixture
async def cs_cp(cs_env: environment.LocalEnvironment) -> AsyncIterator[kube.ApiClient]:
    async with cs_env.client() as api:
        yield api


def failover(health: options.ClusterHealth = QUICK) -> options.Options:
    return options.Options(health=health)


def ready_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    found = decision.find((obj.get("status") or {}).get("conditions") or [], "Ready")
    return dict(found) if found is not None else None


async def wait_ready(cp: kube.ApiClient, name: str, status: str, reason: str | None = None,
                     timeout: float = 60.0) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        obj = await cp.get(resources.CLUSTERS, name)
        ready = ready_of(obj)
        if ready and ready["status"] == status and reason in (None, ready["reason"]):
            return obj
        return None
    found: dict[str, Any] = await waiting.eventually(check, timeout=timeout, interval=0.2)
    return found


def sample(registry: prometheus_client.CollectorRegistry, name: str,
           labels: dict[str, str]) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def more_probes(registry: prometheus_client.CollectorRegistry, result: str,
                      count: int) -> None:
    """Wait until ``count`` more probes of the member had ``result`` (from the metric)."""
    labels = {"cluster": MEMBER, "result": result}
    name = "clusterhealth_cluster_health_probes_total"
    before = sample(registry, name, labels)

    async def done() -> bool:
        return sample(registry, name, labels) >= before + count
    await waiting.eventually(done, timeout=30, interval=0.1)


def parse_time(text: str) -> float:
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.UTC).timestamp()


async def test_ready_member_gets_its_fields_and_other_writers_keep_theirs(
        cs_cp: kube.ApiClient) -> None:
    # the agent's condition and the remedy controller's actions, by their own managers
    await cs_cp.apply(resources.CLUSTERS, {"metadata": {"name": MEMBER}, "status": {
        "conditions": [{"type": "ServiceDomainNameResolutionReady", "status": "False",
                        "reason": "ServiceDomainNameResolutionFailed", "message": "agent",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
        field_manager="clusterhealth-agent", subresource="status")
    await cs_cp.apply(resources.CLUSTERS, {"metadata": {"name": MEMBER}, "status": {
        "remedyActions": ["TrafficControl"]}},
        field_manager="clusterhealth-remedy", subresource="status")
    async with cpkit.running_manager(cs_cp, NAMES, failover=failover()) as running:
        async def filled() -> dict[str, Any] | None:
            obj = await cs_cp.get(resources.CLUSTERS, MEMBER)
            status = obj.get("status") or {}
            ready = ready_of(obj)
            return obj if ready and ready["status"] == "True" and status.get(
                "resourceSummary") and status.get("apiEnablements") else None
        obj = await waiting.eventually(filled, timeout=60, interval=0.2)
        status = obj["status"]
        assert status["kubernetesVersion"].startswith("v1.")
        served = {e["groupVersion"]: {r["kind"] for r in e["resources"]}
                  for e in status["apiEnablements"]}
        assert {"Pod", "Secret", "Node"} <= served["v1"]
        assert "Deployment" in served["apps/v1"]
        assert not any("/" in r["name"] for e in status["apiEnablements"]
                       for r in e["resources"])  # no subresources
        complete = decision.find(status["conditions"], "CompleteAPIEnablements")
        assert complete is not None and complete["status"] == "True"
        assert status["nodeSummary"] == {"totalNum": 0, "readyNum": 0}  # a bare API server
        assert status["resourceSummary"]["allocated"]["pods"] == "0"
        ready = ready_of(obj)
        assert ready is not None and ready["reason"] == "ClusterReady"
        # the other writers' fields survived every write
        agent = decision.find(status["conditions"], "ServiceDomainNameResolutionReady")
        assert agent is not None and agent["status"] == "False"
        assert status["remedyActions"] == ["TrafficControl"]
        # our manager owns our fields only
        full = await cs_cp.request("GET", resources.CLUSTERS.path(MEMBER))
        mine = [m for m in full["metadata"]["managedFields"]
                if m["manager"] == controller.FIELD_MANAGER]
        assert mine and all(m["operation"] == "Apply" for m in mine)
        owned = str(mine[0]["fieldsV1"])
        assert "remedyActions" not in owned and "ServiceDomainNameResolution" not in owned
        assert sample(running.registry, "clusterhealth_cluster_ready",
                      {"cluster": MEMBER, "status": "True"}) == 1
        # nothing changes, nothing is written: over several probes the object keeps its
        # resourceVersion (and so Ready its lastTransitionTime)
        version = obj["metadata"]["resourceVersion"]
        reads = running.manager.parts["clusterStatus"]
        assert isinstance(reads, controller.ClusterStatusController)
        known = reads.discovery.known[MEMBER]  # the member's discovery tags, kept
        await more_probes(running.registry, "ok", 4)
        again = await cs_cp.get(resources.CLUSTERS, MEMBER)
        assert again["metadata"]["resourceVersion"] == version
        # and every probe since was answered 304: nothing read or parsed again
        assert reads.discovery.known[MEMBER] is known


async def test_stopped_member_goes_not_reachable_after_the_threshold_and_back(
        cs_env: environment.LocalEnvironment, cs_cp: kube.ApiClient) -> None:
    async with cpkit.running_manager(cs_cp, NAMES, failover=failover()) as running:
        await wait_ready(cs_cp, MEMBER, "True")
        stopped = time.time()
        await cs_env.stop_server(MEMBER)
        try:
            obj = await wait_ready(cs_cp, MEMBER, "False", "ClusterNotReachable")
            seen_false = time.time()
        finally:
            await cs_env.start_server(MEMBER)
        started = time.time()
        # not before the failure threshold (a lower bound: it cannot come earlier)
        assert seen_false - stopped >= QUICK.failure_threshold
        ready = ready_of(obj)
        assert ready is not None
        assert parse_time(ready["lastTransitionTime"]) >= int(stopped) + QUICK.failure_threshold - 1
        assert sample(running.registry, "clusterhealth_cluster_ready",
                      {"cluster": MEMBER, "status": "False"}) == 1
        assert sample(running.registry, "clusterhealth_cluster_health_probes_total",
                      {"cluster": MEMBER, "result": "unreachable"}) >= 1
        back = await wait_ready(cs_cp, MEMBER, "True", "ClusterReady")
        assert time.time() - started >= QUICK.success_threshold
        ready = ready_of(back)
        assert ready is not None
        assert parse_time(ready["lastTransitionTime"]) >= int(started) + QUICK.success_threshold - 1

        async def events() -> list[str]:
            listed = await cs_cp.list(resources.EVENTS, field_selector=(
                f"involvedObject.kind=Cluster,involvedObject.name={MEMBER}"))
            return [e["reason"] for e in listed["items"]]
        reasons = await waiting.eventually(
            lambda: _having(events, {"ClusterNotReachable", "ClusterReady"}), timeout=30,
            interval=0.2)
        assert {"ClusterNotReachable", "ClusterReady"} <= set(reasons)


async def _having(read: Any, wanted: set[str]) -> list[str] | None:
    found: list[str] = await read()
    return found if wanted <= set(found) else None


async def test_a_member_whose_api_server_dies_is_probed_at_once_not_a_period_later(
        cs_env: environment.LocalEnvironment, cs_cp: kube.ApiClient) -> None:
    """Its Node and Pod watches fail when its API server dies: the controller probes it then.

    The period here is 300 s, so without that the first failed probe would come
    minutes later; the failure threshold still runs from it.
    """
    slow = options.ClusterHealth(update_frequency=300.0, success_threshold=3.0,
                                 failure_threshold=3.0, monitor_grace_period=600.0,
                                 probe_timeout=2.0)
    async with cpkit.running_manager(cs_cp, NAMES, failover=failover(slow)) as running:
        async def first_reconcile_done() -> bool:  # the watches are made in the first one
            return sample(running.registry, "clusterhealth_controller_reconcile_total",
                          {"controller": controller.CONTROLLER,
                           "result": "requeue_after"}) >= 1
        await waiting.eventually(first_reconcile_done, timeout=30, interval=0.1)
        await wait_ready(cs_cp, MEMBER, "True")
        stopped = time.monotonic()
        await cs_env.stop_server(MEMBER)
        try:
            obj = await wait_ready(cs_cp, MEMBER, "False", "ClusterNotReachable", timeout=60)
            assert time.monotonic() - stopped >= slow.failure_threshold
        finally:
            await cs_env.start_server(MEMBER)
        ready = ready_of(obj)
        assert ready is not None
        assert sample(running.registry, "clusterhealth_cluster_health_probes_total",
                      {"cluster": MEMBER, "result": "unreachable"}) >= 1


async def test_a_flap_shorter_than_the_threshold_changes_nothing(
        cs_env: environment.LocalEnvironment, cs_cp: kube.ApiClient) -> None:
    patient = options.ClusterHealth(update_frequency=0.5, success_threshold=3.0,
                                    failure_threshold=60.0, monitor_grace_period=90.0,
                                    probe_timeout=2.0)
    async with cpkit.running_manager(cs_cp, NAMES, failover=failover(patient)) as running:
        obj = await wait_ready(cs_cp, MEMBER, "True")
        before = ready_of(obj)
        await cs_env.stop_server(MEMBER)
        try:
            await more_probes(running.registry, "unreachable", 2)
        finally:
            await cs_env.start_server(MEMBER)
        await more_probes(running.registry, "ok", 3)
        after = ready_of(await cs_cp.get(resources.CLUSTERS, MEMBER))
        assert after == before  # same status, reason and lastTransitionTime


LEGACY_DISCOVERY: dict[str, Any] = {
    "/api": {"kind": "APIVersions", "versions": ["v1"]},
    "/apis": {"kind": "APIGroupList", "groups": [
        {"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}]}]},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
        {"name": "pods", "kind": "Pod"}, {"name": "pods/status", "kind": "Pod"}]},
    "/apis/apps/v1": {"kind": "APIResourceList", "groupVersion": "apps/v1", "resources": [
        {"name": "deployments", "kind": "Deployment"}]},
}
"""Discovery as a server without aggregated discovery answers it (one document a group)."""


class FakeMember:
    """A loopback HTTP server answering health endpoints as told (an API server will not).

    It serves legacy discovery only, so the controller's fallback from
    aggregated discovery is exercised too.
    """

    def __init__(self) -> None:
        self.readyz = 404
        self.healthz = 500
        self.paths: list[str] = []
        self.runner: web.AppRunner | None = None
        self.url = ""
        self.cut_at: int | None = None
        """Index in ``paths`` of the last request answered before the member went silent."""
        self._cut_next_probe = False
        self._released = asyncio.Event()

    def cut_after_next_probe(self) -> None:
        """Answer the next ``/readyz``, then nothing more (a network cut right after it)."""
        self._cut_next_probe = True

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.paths.append(request.path)
        if self.cut_at is not None:
            await self._released.wait()  # no answer (until the server stops)
            return web.Response(status=503)
        if request.path == "/readyz" and self._cut_next_probe:
            self.cut_at = len(self.paths) - 1
        if request.path == "/readyz":
            return web.Response(status=self.readyz, text="ok" if self.readyz == 200 else "no")
        if request.path == "/healthz":
            return web.Response(status=self.healthz, text="ok" if self.healthz == 200 else "no")
        if request.path == "/version":
            return web.json_response({"gitVersion": "v1.99.0-fake"})
        if request.path in LEGACY_DISCOVERY:
            return web.json_response(LEGACY_DISCOVERY[request.path])
        return web.json_response({"kind": "Status", "code": 404, "reason": "NotFound"},
                                 status=404)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = self.runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        self._released.set()
        if self.runner is not None:
            await self.runner.cleanup()


@contextlib.asynccontextmanager
async def fake_cluster(cp: kube.ApiClient, name: str, endpoint: str,
                       sync_mode: str = "Push") -> AsyncIterator[None]:
    secret = {"metadata": {"name": name, "namespace": "karmada-cluster"}, "type": "Opaque",
              "data": {"token": base64.b64encode(b"fake-token").decode()}}
    await cp.create(resources.SECRETS, secret)
    await cp.create(resources.CLUSTERS, {
        "apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"apiEndpoint": endpoint, "syncMode": sync_mode,
                 "secretRef": {"namespace": "karmada-cluster", "name": name}}})
    try:
        yield
    finally:
        await cp.delete(resources.CLUSTERS, name, missing_ok=True)
        await cp.delete(resources.SECRETS, name, namespace="karmada-cluster", missing_ok=True)


async def test_not_ok_answers_are_not_ready_and_readyz_404_falls_back_to_healthz(
        cs_cp: kube.ApiClient) -> None:
    """ClusterNotReady needs an API server that answers but not ok: a fake one does.

    (A real kube-apiserver cannot be made to answer /readyz 404 or /healthz 500
    on demand.)  Once ok, its served APIs come from legacy discovery.
    """
    member = FakeMember()
    await member.start()
    name = testkit.unique("fake")
    try:
        async with fake_cluster(cs_cp, name, member.url), \
                cpkit.running_manager(cs_cp, NAMES, failover=failover()):
            obj = await wait_ready(cs_cp, name, "False", "ClusterNotReady")
            ready = ready_of(obj)
            assert ready is not None and "/healthz answered 500" in ready["message"]
            assert "/readyz" in member.paths and "/healthz" in member.paths
            assert member.paths.index("/readyz") < member.paths.index("/healthz")
            member.healthz = 200
            obj = await wait_ready(cs_cp, name, "True", "ClusterReady")
            assert obj["status"]["kubernetesVersion"] == "v1.99.0-fake"
            assert obj["status"]["apiEnablements"] == [
                {"groupVersion": "apps/v1", "resources": [{"name": "deployments",
                                                           "kind": "Deployment"}]},
                {"groupVersion": "v1", "resources": [{"name": "pods", "kind": "Pod"}]}]
            complete = decision.find(obj["status"]["conditions"], "CompleteAPIEnablements")
            assert complete is not None and complete["reason"] == "Complete"
            member.readyz = 500  # /readyz served again, and not ok: no fallback this time
            obj = await wait_ready(cs_cp, name, "False", "ClusterNotReady")
            ready = ready_of(obj)
            assert ready is not None and "/readyz answered 500" in ready["message"]
    finally:
        await member.stop()


async def test_a_member_cut_off_after_its_probe_counts_as_failed_at_its_next_read(
        cs_cp: kube.ApiClient) -> None:
    """``/readyz`` answered, then silence: ``/version``'s timeout is the failed probe.

    The controller reads nothing more of the member (no discovery, whose timeout
    would come on top) and probes again one period later, so the failure
    threshold runs from the first read that went unanswered.  (A real API
    server cannot be made to go silent between two requests on demand.)
    """
    member = FakeMember()
    member.readyz = member.healthz = 200
    await member.start()
    name = testkit.unique("cut")
    try:
        async with fake_cluster(cs_cp, name, member.url), \
                cpkit.running_manager(cs_cp, NAMES, failover=failover()) as running:
            await wait_ready(cs_cp, name, "True", "ClusterReady")
            before = sample(running.registry, "clusterhealth_cluster_health_probes_total",
                            {"cluster": name, "result": "unreachable"})
            member.cut_after_next_probe()
            obj = await wait_ready(cs_cp, name, "False", "ClusterNotReachable")
            assert member.cut_at is not None
            reads = [path for path in member.paths[member.cut_at:] if path in HEALTH_READS]
            assert reads[:3] == ["/readyz", "/version", "/readyz"], reads
            assert not {"/api", "/apis"} & set(reads), reads
            assert sample(running.registry, "clusterhealth_cluster_health_probes_total",
                          {"cluster": name, "result": "unreachable"}) >= before + 2
            ready = ready_of(obj)
            assert ready is not None and "no answer within" in ready["message"], ready
    finally:
        await member.stop()


HEALTH_READS = frozenset({"/readyz", "/healthz", "/version", "/api", "/apis"})
"""The probe's and the refresh's reads (not the Node and Pod watches)."""


async def test_unknown_after_the_grace_period_without_any_probe_result(
        cs_cp: kube.ApiClient) -> None:
    name = testkit.unique("nosecret")
    async with fake_cluster(cs_cp, name, "https://127.0.0.1:1"):
        await cs_cp.delete(resources.SECRETS, name, namespace="karmada-cluster")
        async with cpkit.running_manager(cs_cp, NAMES, failover=failover()):
            obj = await wait_ready(cs_cp, name, "Unknown", "ClusterStatusNeverUpdated")
            ready = ready_of(obj)
            assert ready is not None and name in ready["message"]


async def test_pull_cluster_goes_unknown_when_its_agent_stops_reporting(
        cs_cp: kube.ApiClient) -> None:
    name = testkit.unique("pull")
    async with fake_cluster(cs_cp, name, "https://127.0.0.1:1", sync_mode="Pull"):
        await cs_cp.apply(resources.CLUSTERS, {"metadata": {"name": name}, "status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "ClusterReady",
                            "message": "agent", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
            field_manager="karmada-agent", subresource="status")
        async with cpkit.running_manager(cs_cp, NAMES, failover=failover()):
            obj = await wait_ready(cs_cp, name, "Unknown", "ClusterStatusUnknown")
            full = await cs_cp.request("GET", resources.CLUSTERS.path(name))
            managers = {m["manager"] for m in full["metadata"]["managedFields"]}
            assert controller.MONITOR_FIELD_MANAGER in managers
            assert controller.FIELD_MANAGER not in managers  # never probed, nothing else written
            assert "kubernetesVersion" not in obj["status"]
