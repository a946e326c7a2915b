"""``clusterhealth explain cluster`` end to end: a real control plane, the command as a process.

The environment is this module's own (a control plane, no members): the test
writes a Cluster's conditions and taints by hand, which must not reach other
tests' controllers.  The objects are what the components would write, under
their field managers: conditions by two named writers, ``remedyActions`` as the
remedy controller's field manager, an MCI status blocking the cluster, a
binding with a graceful-eviction task away from it; no controller runs, so
nothing changes them while the command reads.
"""

from __future__ import annotations

import asyncio
import datetime
import io
import json
import os
import pathlib
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from clusterhealth_cli import app, errors
from clusterhealth_core import status
from clusterhealth_core.kube import resources
from clusterhealth_localenv import conditions, environment

BIN = pathlib.Path(sys.executable).parent
DNS = "ServiceDomainNameResolutionReady"
NOT_READY = "cluster.karmada.io/not-ready"
AGENT = "test-dns-agent"
CLUSTER_STATUS = "test-cluster-status"


@pytest.fixture(scope="module")
async def cli_env() -> AsyncIterator[environment.LocalEnvironment]:
    async with environment.LocalEnvironment(environment.EnvironmentConfig(members=())) as local:
        yield local


def seconds_ago(seconds: int) -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0) - datetime.timedelta(
        seconds=seconds)


def rfc3339(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def binding(name: str, namespace: str | None, targets: list[str],
            tolerations: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    resource = resources.RESOURCE_BINDINGS if namespace else resources.CLUSTER_RESOURCE_BINDINGS
    metadata: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": resource.api_version, "kind": resource.kind, "metadata": metadata,
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                                  **({"namespace": namespace} if namespace else {})},
                     "replicas": len(targets),
                     "placement": {"clusterTolerations": tolerations or []},
                     "clusters": [{"name": n, "replicas": 1} for n in targets], **spec}}


@pytest.fixture(scope="module")
async def scene(cli_env: environment.LocalEnvironment) -> dict[str, Any]:
    """member1: DNS and Ready False, a NoExecute taint, TrafficControl, blocked, evicted from."""
    tainted_at = seconds_ago(60)
    async with cli_env.client() as api:
        for name in ("member1", "member2"):
            await api.create(resources.CLUSTERS, {
                "apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
                "metadata": {"name": name},
                "spec": {"apiEndpoint": "https://127.0.0.1:1", "syncMode": "Push"}})
        await api.patch(resources.CLUSTERS, "member1", {"spec": {"taints": [
            {"key": NOT_READY, "effect": "NoExecute", "timeAdded": rfc3339(tainted_at)},
            {"key": NOT_READY, "effect": "NoSchedule", "timeAdded": rfc3339(tainted_at)}]}},
            patch_type="merge")
        await conditions.set_condition(api, "member1", DNS, "False", manager=AGENT,
                                       reason="LookupFailed", message="3 of 3 lookups failed")
        await conditions.set_condition(api, "member1", "Ready", "False", manager=CLUSTER_STATUS,
                                       reason="ClusterNotReachable", message="no answer")
        for body in (
            {"metadata": {"name": "dns-failure"}, "spec": {
                "clusterAffinity": {"clusterNames": ["member1", "member2"]},
                "decisionMatches": [{"clusterConditionMatch": {
                    "conditionType": DNS, "operator": "Equal", "conditionStatus": "False"}}],
                "actions": ["TrafficControl"]}},
            {"metadata": {"name": "not-ready-everywhere"}, "spec": {
                "decisionMatches": [{"clusterConditionMatch": {
                    "conditionType": "Ready", "operator": "Equal", "conditionStatus": "Unknown"}}],
                "actions": ["TrafficControl"]}},
            {"metadata": {"name": "member2-maintenance"}, "spec": {
                "clusterAffinity": {"clusterNames": ["member2"]}, "actions": ["TrafficControl"]}},
        ):
            await api.create(resources.REMEDIES, {"apiVersion": resources.REMEDIES.api_version,
                                                  "kind": "Remedy", **body})
        await status.apply_status(api, resources.CLUSTERS, "member1", {
            "remedyActions": ["TrafficControl"],
            "remedyActionSources": [{"action": "TrafficControl", "remedies": ["dns-failure"]}]},
            field_manager="clusterhealth-remedy")
        await api.create(resources.MULTI_CLUSTER_INGRESSES, {
            "apiVersion": resources.MULTI_CLUSTER_INGRESSES.api_version,
            "kind": "MultiClusterIngress", "metadata": {"name": "shop", "namespace": "default"},
            "spec": {"rules": [{"host": "shop.example", "http": {"paths": [{
                "path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": "shop", "port": {"number": 80}}}}]}}]}})
        await status.apply_status(api, resources.MULTI_CLUSTER_INGRESSES, "shop",
                                  {"trafficBlockClusters": ["member1"]},
                                  field_manager="test-mci-provider", namespace="default")
        await api.create(resources.RESOURCE_BINDINGS, binding(
            "web", "default", ["member1", "member2"],
            [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute",
              "tolerationSeconds": 3600}]), namespace="default")
        await api.create(resources.CLUSTER_RESOURCE_BINDINGS, binding("rbac", None, ["member1"]))
        await api.create(resources.RESOURCE_BINDINGS, binding(
            "api", "default", ["member2"], gracefulEvictionTasks=[{
                "fromCluster": "member1", "reason": "TaintUntolerated",
                "producer": "TaintManager", "purgeMode": "Gracefully",
                "creationTimestamp": rfc3339(tainted_at),
                "message": f"cluster member1: taint {NOT_READY}:NoExecute is not tolerated"}]),
            namespace="default")
    return {"tainted_at": tainted_at}


async def clusterhealth(*args: str, env: dict[str, str] | None = None,
                        program: str = "clusterhealth") -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        str(BIN / program), *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env if env is not None else dict(os.environ))
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_explain_names_everything(cli_env: environment.LocalEnvironment,
                                        scene: dict[str, Any]) -> None:
    code, out, err = await clusterhealth("explain", "cluster", "member1",
                                         "--kubeconfig", str(cli_env.kubeconfig()))
    assert (code, err) == (errors.OK, ""), out + err
    print(out)  # shown when the test fails
    lines = [line.strip() for line in out.splitlines()]
    # conditions with their writers (managedFields)
    dns = next(i for i, line in enumerate(lines) if line.startswith(DNS))
    assert lines[dns].split()[:2] == [DNS, "False"] and "LookupFailed" in lines[dns]
    assert lines[dns + 1] == "message: 3 of 3 lookups failed"
    assert lines[dns + 2].startswith(f"written by {AGENT} (Apply, status subresource, ")
    ready = next(i for i, line in enumerate(lines) if line.startswith("Ready "))
    assert lines[ready + 1] == "message: no answer"
    assert lines[ready + 2].startswith(f"written by {CLUSTER_STATUS} (Apply, status subresource")
    # remedy actions and the Remedies: which acts and on which condition
    assert "TrafficControl  from Remedy dns-failure" in lines
    assert f"dns-failure: acts because {DNS} Equal False holds: TrafficControl" in lines
    assert ("not-ready-everywhere: covers it, but no decision match holds: Ready Equal Unknown "
            "(it is False)") in lines
    assert "(1 other Remedy does not cover member1)" in lines
    # taints, and when the bindings scheduled here leave
    evict_at = rfc3339(scene["tainted_at"] + datetime.timedelta(seconds=3600))
    assert any(line.startswith(f"{NOT_READY}:NoExecute  added {rfc3339(scene['tainted_at'])}")
               for line in lines)
    assert any(line.startswith(f"{NOT_READY}:NoSchedule") for line in lines)
    assert (f"rbac (ClusterResourceBinding): evicted as soon as the taint manager acts: "
            f"taint {NOT_READY}:NoExecute is not tolerated") in lines
    web = next(line for line in lines if line.startswith("default/web (ResourceBinding)"))
    assert web.startswith(f"default/web (ResourceBinding): evicted at {evict_at} (in ")
    assert web.endswith(f"taint {NOT_READY}:NoExecute tolerated for 3600s")
    assert not any(line.startswith("default/api (ResourceBinding): evicted") for line in lines)
    # traffic and evictions
    assert "blocked by default/shop" in lines
    api = next(i for i, line in enumerate(lines) if line.startswith("default/api"))
    assert lines[api].startswith(f"default/api (ResourceBinding): TaintUntolerated by "
                                 f"TaintManager, created {rfc3339(scene['tainted_at'])}")
    assert lines[api + 1] == (f"message: cluster member1: taint {NOT_READY}:NoExecute is not "
                              "tolerated")
    ends = rfc3339(scene["tainted_at"] + datetime.timedelta(seconds=600))
    assert lines[api + 2].startswith(f"the copy on member1 stays until the replacement is "
                                     f"healthy, at the latest {ends}")
    assert "Notes:" not in lines  # the Cluster holds what the Remedies give


async def test_explain_json_and_kubeconfig_from_the_environment(
        cli_env: environment.LocalEnvironment, scene: dict[str, Any],
        tmp_path: pathlib.Path) -> None:
    env = {**os.environ, "KUBECONFIG": str(cli_env.kubeconfig()), "HOME": str(tmp_path)}
    code, out, err = await clusterhealth("explain", "cluster", "member1", "-o", "json", env=env)
    assert (code, err) == (errors.OK, "")
    document = json.loads(out)
    writers = {c["type"]: c["writers"][0]["manager"] for c in document["conditions"]}
    assert writers == {DNS: AGENT, "Ready": CLUSTER_STATUS}
    assert document["remedyActions"] == ["TrafficControl"]
    assert document["computedRemedyActionSources"] == {"TrafficControl": ["dns-failure"]}
    assert [r["remedy"] for r in document["remedies"] if r["acts"]] == ["dns-failure"]
    assert document["blockedBy"] == ["default/shop"]
    assert {(b["kind"], b["name"], b["immediately"]) for b in document["bindings"]} == {
        ("ClusterResourceBinding", "rbac", True), ("ResourceBinding", "web", False)}
    assert [(e["name"], e["reason"]) for e in document["evictions"]] == [
        ("api", "TaintUntolerated")]
    assert document["scheduledBindings"] == 2


async def test_member2_is_not_blocked_and_has_pending_actions(
        cli_env: environment.LocalEnvironment, scene: dict[str, Any]) -> None:
    """member2: no conditions, one immediate Remedy, nothing written by a controller yet."""
    code, out, err = await clusterhealth("explain", "cluster", "member2",
                                         "--kubeconfig", str(cli_env.kubeconfig()))
    assert (code, err) == (errors.OK, ""), err
    assert "none (a freshly joined cluster: only immediate Remedies act on it)" in out
    assert "member2-maintenance: acts immediately (no decisionMatches): TrafficControl" in out
    assert "no MultiClusterIngress blocks it" in out
    assert ("the Remedies give remedyActions [TrafficControl] but the Cluster holds []: the "
            "remedy controller has not written it yet") in out
    assert "2 binding(s) scheduled here; no standing NoExecute taint, so none is evicted" in out


async def test_a_cluster_that_does_not_exist(cli_env: environment.LocalEnvironment,
                                             scene: dict[str, Any]) -> None:
    code, out, err = await clusterhealth("explain", "cluster", "member9",
                                         "--kubeconfig", str(cli_env.kubeconfig()))
    assert code == errors.NOT_FOUND
    assert out == ""
    assert err == (f"clusterhealth: error: no Cluster named 'member9' on "
                   f"{cli_env.servers[environment.CONTROL_PLANE].url} (list them with kubectl "
                   "get clusters)\n")


def kubeconfig_for(path: pathlib.Path, server: str) -> pathlib.Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "cp",
        "clusters": [{"name": "cp", "cluster": {"server": server,
                                                "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "cp", "context": {"cluster": "cp", "user": "u"}}]}))
    return path


async def test_unreachable_and_no_kubeconfig(tmp_path: pathlib.Path) -> None:
    unreachable = kubeconfig_for(tmp_path / "kubeconfig", "https://127.0.0.1:1")
    code, out, err = await clusterhealth("explain", "cluster", "member1",
                                         "--kubeconfig", str(unreachable))
    assert code == errors.API
    assert out == ""
    assert err.startswith("clusterhealth: error: cannot reach the control plane: "
                          "https://127.0.0.1:1 unreachable (GET /apis/cluster.karmada.io/"
                          "v1alpha1/clusters/member1)")
    assert len(err.splitlines()) == 1 and "Traceback" not in err

    env = {k: v for k, v in os.environ.items()
           if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["HOME"] = str(tmp_path)
    code, out, err = await clusterhealth("explain", "cluster", "member1", env=env)
    assert code == errors.API
    assert err == (f"clusterhealth: error: kubeconfig: no kubeconfig: not running in a pod "
                   f"(KUBERNETES_SERVICE_HOST unset), {tmp_path}/.kube/config does not exist; "
                   "give --kubeconfig\n")
    code, out, err = await clusterhealth("explain", "cluster", "member1",
                                         "--kubeconfig", str(tmp_path / "missing"))
    assert code == errors.API
    assert err.startswith("clusterhealth: error: kubeconfig: ") and len(err.splitlines()) == 1


async def test_refused_credentials(cli_env: environment.LocalEnvironment,
                                   tmp_path: pathlib.Path) -> None:
    """A token the API server does not know: one line, exit 5."""
    server = cli_env.servers[environment.CONTROL_PLANE].url
    code, _, err = await clusterhealth(
        "explain", "cluster", "member1",
        "--kubeconfig", str(kubeconfig_for(tmp_path / "kubeconfig", server)))
    assert code == errors.API
    assert err.startswith("clusterhealth: error: the control plane refused the credentials: "
                          "401")
    assert len(err.splitlines()) == 1


async def test_bad_flags(cli_env: environment.LocalEnvironment) -> None:
    code, out, err = await clusterhealth("explain", "cluster", "member1", "--kubeconfig",
                                         str(cli_env.kubeconfig()), "--request-timeout", "0")
    assert (code, out) == (errors.USAGE, "")
    assert "argument --request-timeout: '0': the duration must be > 0" in err
    code, out, err = await clusterhealth("explain", "cluster")
    assert code == errors.USAGE
    assert "the following arguments are required: NAME" in err


async def test_status_shows_the_fleet_on_one_screen(cli_env: environment.LocalEnvironment,
                                                    scene: dict[str, Any]) -> None:
    async with cli_env.client() as api:  # a component's Lease, as a leader renews it
        await api.create(resources.LEASES, {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "clusterhealth-remedy", "namespace": "default"},
            "spec": {"holderIdentity": "remedy-0_abc", "leaseDurationSeconds": 15,
                     "renewTime": datetime.datetime.now(datetime.UTC).strftime(
                         "%Y-%m-%dT%H:%M:%S.%fZ")}}, namespace="default")
    kubeconfig = str(cli_env.kubeconfig())
    code, out, err = await clusterhealth("status", "--kubeconfig", kubeconfig)
    assert (code, err) == (errors.OK, ""), out + err
    print(out)
    lines = out.splitlines()
    assert lines[0].split() == ["CLUSTER", "READY", "DNS", "REMEDY-ACTIONS", "TAINTS",
                                "BLOCKED-BY", "EVICTIONS"]
    assert lines[1].split() == ["member1", "False", "False", "TrafficControl",
                                "not-ready:NoExecute,not-ready:NoSchedule", "default/shop", "1"]
    assert lines[2].split() == ["member2", "-", "-", "-", "-", "-", "0"]
    leader = next(line for line in lines if "clusterhealth-remedy" in line)
    assert leader.split()[:2] == ["default/clusterhealth-remedy", "remedy-0_abc"]
    code, out, err = await clusterhealth("status", "--kubeconfig", kubeconfig, "-o", "yaml")
    assert code == errors.OK, err
    document = yaml.safe_load(out)
    (member1,) = [c for c in document["clusters"] if c["name"] == "member1"]
    assert member1["remedyActions"] == ["TrafficControl"] and member1["evictions"] == 1
    assert document["leaders"][0]["holder"] == "remedy-0_abc"
    code, out, err = await clusterhealth("explain", "cluster", "member1", "--kubeconfig",
                                         kubeconfig, "-o", "yaml")
    assert code == errors.OK, err
    assert yaml.safe_load(out)["blockedBy"] == ["default/shop"]


async def test_request_timeout_bounds_the_whole_command(tmp_path: pathlib.Path) -> None:
    """A server that accepts and never answers: --request-timeout 2s ends it in about 2s."""
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(60)
        writer.close()
    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    kubeconfig = tmp_path / "silent.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    try:
        for command in (["status"], ["explain", "cluster", "member1"]):
            out, err = io.StringIO(), io.StringIO()
            argv = [*command, "--kubeconfig", str(kubeconfig), "--request-timeout", "2s"]
            started = time.monotonic()  # in-process: the command's time, not Python's start
            code = await asyncio.to_thread(app.main, argv, out=out, err=err)
            took = time.monotonic() - started
            assert code == errors.API, out.getvalue() + err.getvalue()
            assert "within 2s (--request-timeout)" in err.getvalue()
            # three attempts of 2s each and their pauses took about 7s before
            assert took < 4.5, f"{command} took {took:.1f}s"
    finally:
        server.close()
        await server.wait_closed()
