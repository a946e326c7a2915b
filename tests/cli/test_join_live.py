"""``clusterhealth join`` / ``unjoin`` on real API servers; the member then Ready and reporting.

The environment is this module's own: a control plane and one member that
nobody registered, each with a real ``kube-controller-manager`` running the
token and garbage-collection controllers (so token Secrets get filled as in a
real cluster).  The test follows docs/operations.md ("Install with join") step
by step: a dry run changes nothing; the join makes every object (and installs
the agent and the MCI provider's read-only identity with helm into the member, its token
into the control plane); a second join
changes nothing; the controller manager's clusterStatus controller, working with
nothing but the Secret join wrote (the member identity's scoped rights), makes
the Cluster Ready; the agent, with nothing but the kubeconfig Secret join wrote
in the member, reports DNS from a real dnsmasq and may touch no other Cluster;
unjoin removes it all.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import pathlib
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from clusterhealth_cli import errors, joinplan
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config as kubecfg
from clusterhealth_core.kube import errors as kube_errors
from clusterhealth_core.kube import resources
from clusterhealth_localenv import binaries, dns, environment, waiting

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent
MEMBER = "joined"
DNS = "ServiceDomainNameResolutionReady"
FAST_STATUS = ["--cluster-status-update-frequency", "1s", "--cluster-success-threshold", "1s",
               "--cluster-failure-threshold", "3s", "--cluster-monitor-grace-period", "10s"]
AGENT_FAST = ["--detect-period", "0.5s", "--detect-failure-threshold", "1s",
              "--detect-success-threshold", "1s", "--stale-threshold", "5s",
              "--node-heartbeat-period", "1s", "--report-period", "2s",
              "--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s",
              "--leader-elect-retry-period", "0.5s"]


@pytest.fixture(scope="module")
async def join_env() -> AsyncIterator[environment.LocalEnvironment]:
    config = environment.EnvironmentConfig(members=(MEMBER,), register_members=False,
                                           token_controllers=True)
    async with environment.LocalEnvironment(config) as local:
        yield local


async def cli(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        str(BIN / "clusterhealth"), *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env)
    out, err = await asyncio.wait_for(proc.communicate(), 180)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def join_args(local: environment.LocalEnvironment, *extra: str) -> list[str]:
    return ["join", MEMBER, "--kubeconfig", str(local.kubeconfig()),
            "--cluster-kubeconfig", str(local.kubeconfig(MEMBER)), "--wait", "60s", *extra]


async def exists(api: kube.ApiClient, resource: resources.Resource, name: str,
                 namespace: str | None = None) -> bool:
    try:
        await api.get(resource, name, namespace=namespace)
    except kube_errors.NotFound:
        return False
    return True


def secret_value(obj: dict[str, Any], key: str) -> bytes:
    return base64.b64decode(obj["data"][key])


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for item in (obj.get("status") or {}).get("conditions") or []:
        if item.get("type") == ctype:
            return dict(item)
    return None


async def wait_condition(cp: kube.ApiClient, ctype: str, status: str,
                         timeout: float = 60) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        found = condition(await cp.get(resources.CLUSTERS, MEMBER), ctype)
        return found if found is not None and found["status"] == status else None
    result: dict[str, Any] = await waiting.eventually(check, timeout=timeout, interval=0.3)
    return result


@contextlib.contextmanager
def process(argv: list[str], log: pathlib.Path, env: dict[str, str]) -> Any:
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def test_join_follows_the_docs_and_the_member_reports(
        join_env: environment.LocalEnvironment, python: str, python_env: dict[str, str],
        tmp_path: pathlib.Path) -> None:
    helm = str(binaries.ensure_helm())
    env = {**python_env, "PATH": f"{pathlib.Path(helm).parent}{os.pathsep}{python_env['PATH']}"}
    async with join_env.client() as cp, join_env.client(MEMBER) as member:
        # 1. a dry run reads, says what it would do, and writes nothing
        code, out, err = await cli(env, *join_args(join_env, "--dry-run"))
        assert code == errors.OK, err
        assert f"serviceaccount/karmada-cluster/karmada-{MEMBER} created (dry run)" in out
        assert f"cluster.cluster.karmada.io/{MEMBER} created (dry run)" in out
        assert f"cluster({MEMBER}) would be joined (dry run: nothing was changed)" in out
        assert not await exists(cp, resources.CLUSTERS, MEMBER)
        assert not await exists(member, resources.NAMESPACES, joinplan.CLUSTER_NAMESPACE)

        # 2. the join, with the agent and the MCI member RBAC installed by helm
        code, out, err = await cli(env, *join_args(
            join_env, "--agent-chart", str(REPO / "charts/agent"),
            "--mci-chart", str(REPO / "charts/mci-provider"), "--helm", helm))
        assert code == errors.OK, err + out
        assert f"cluster({MEMBER}) is joined successfully" in out
        system = await member.get(resources.NAMESPACES, "kube-system")
        cluster = await cp.get(resources.CLUSTERS, MEMBER)
        assert cluster["spec"]["id"] == system["metadata"]["uid"]
        assert cluster["spec"]["apiEndpoint"] == join_env.servers[MEMBER].url
        assert cluster["spec"]["secretRef"] == {"namespace": "karmada-cluster", "name": MEMBER}
        secret = await cp.get(resources.SECRETS, MEMBER, namespace="karmada-cluster")
        assert secret_value(secret, "caBundle") == join_env.ca.cert_pem
        assert secret["metadata"]["ownerReferences"][0]["uid"] == cluster["metadata"]["uid"]
        role = await member.get(joinplan.CLUSTER_ROLES, joinplan.member_role(MEMBER))
        assert role["rules"] == joinplan.member_rules("scoped", joinplan.DEFAULT_KINDS)
        daemonset = await member.request(
            "GET", "/apis/apps/v1/namespaces/clusterhealth-system/daemonsets/"
                   "clusterhealth-agent")
        assert f"--cluster-name={MEMBER}" in " ".join(
            daemonset["spec"]["template"]["spec"]["containers"][0]["args"])
        mci_binding = await member.get(joinplan.CLUSTER_ROLE_BINDINGS, joinplan.MCI_ACCOUNT)
        assert mci_binding["subjects"] == [{"kind": "ServiceAccount",
                                            "name": joinplan.MCI_ACCOUNT,
                                            "namespace": "clusterhealth-system"}]
        # the MCI provider's credential in the control plane is that identity's token
        mci_token = await member.get(resources.SECRETS, joinplan.token_secret(
            joinplan.MCI_ACCOUNT), namespace="clusterhealth-system")
        credential = await cp.get(resources.SECRETS, MEMBER,
                                  namespace=joinplan.MCI_CREDENTIALS_NAMESPACE)
        assert secret_value(credential, "token") == secret_value(mci_token, "token")
        assert secret_value(credential, "caBundle") == join_env.ca.cert_pem

        # 3. again: nothing changes
        code, again, err = await cli(env, *join_args(join_env))
        assert code == errors.OK, err
        report = again.split(f"cluster({MEMBER}) is joined successfully")[0]
        object_lines = [line for line in report.splitlines() if line.startswith("  ")]
        assert object_lines and all(line.endswith(" unchanged") for line in object_lines), again

        # 4. the controller manager's clusterStatus, with the member Secret join wrote only
        with process([python, "-m", "clusterhealth_controlplane", "--kubeconfig",
                      str(join_env.kubeconfig()), "--controllers", "clusterStatus",
                      "--leader-elect", "false", "--bind-address", "127.0.0.1",
                      "--healthz-port", "0", *FAST_STATUS],
                     tmp_path / "controlplane.log", python_env):
            ready = await wait_condition(cp, "Ready", "True")
        assert ready["reason"] == "ClusterReady"

        # 5. the agent, with the kubeconfig Secret join wrote in the member
        agent_secret = await member.get(resources.SECRETS, joinplan.AGENT_SECRET,
                                        namespace="clusterhealth-system")
        agent_kubeconfig = tmp_path / "agent.kubeconfig"
        agent_kubeconfig.write_bytes(secret_value(agent_secret, "kubeconfig"))
        node = "joined-node-0"
        await member.create(resources.NODES, {"metadata": {"name": node}})
        now = "2026-01-01T00:00:00Z"
        await member.patch(resources.NODES, node, {"status": {"conditions": [{
            "type": "Ready", "status": "True", "reason": "Test", "message": "test",
            "lastHeartbeatTime": now, "lastTransitionTime": now}]}},
            subresource="status", patch_type="strategic")
        server = dns.DnsServer("127.0.0.1", records={
            "kubernetes.default.svc.cluster.local": "198.18.0.1"})
        await asyncio.to_thread(server.start)
        try:
            host, port = server.address
            with process([python, "-m", "clusterhealth_agent",
                          "--kubeconfig", str(join_env.kubeconfig(MEMBER)),
                          "--karmada-kubeconfig", str(agent_kubeconfig),
                          "--cluster-name", MEMBER, "--host-name", node,
                          "--nameserver", f"{host}:{port}", "--bind-address", "127.0.0.1",
                          "--healthz-port", "0", "--leader-elect-resource-namespace",
                          "default", *AGENT_FAST], tmp_path / "agent.log", python_env):
                reported = await wait_condition(cp, DNS, "True")
                assert reported["reason"]
                await asyncio.to_thread(server.stop)
                await wait_condition(cp, DNS, "False")
        finally:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(server.stop)
        # the agent's identity may read its own Cluster only
        await cp.create(resources.CLUSTERS, {
            "apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
            "metadata": {"name": "someone-else"}, "spec": {"syncMode": "Push"}})
        async with kube.ApiClient(kubecfg.load_kubeconfig(agent_kubeconfig)) as as_agent:
            await as_agent.get(resources.CLUSTERS, MEMBER)
            with pytest.raises(kube_errors.Forbidden):
                await as_agent.get(resources.CLUSTERS, "someone-else")
        await cp.delete(resources.CLUSTERS, "someone-else")

        # 6. one member, one name: joining it again under another name is refused
        code, out, err = await cli(env, "join", "other-name", "--kubeconfig",
                                   str(join_env.kubeconfig()), "--cluster-kubeconfig",
                                   str(join_env.kubeconfig(MEMBER)))
        assert code == errors.CONFLICT
        assert f"the same cluster has been registered with name {MEMBER}" in err

        # 7. unjoin: everything join made goes, in both API servers
        code, out, err = await cli(env, "unjoin", MEMBER, "--kubeconfig",
                                   str(join_env.kubeconfig()), "--cluster-kubeconfig",
                                   str(join_env.kubeconfig(MEMBER)), "--helm", helm)
        assert code == errors.OK, err + out
        assert f"cluster({MEMBER}) is unjoined successfully" in out
        assert not await exists(cp, resources.CLUSTERS, MEMBER)
        assert not await exists(cp, resources.SECRETS, MEMBER, "karmada-cluster")
        assert not await exists(cp, joinplan.CLUSTER_ROLES, joinplan.agent_role(MEMBER))
        assert not await exists(cp, resources.SECRETS, MEMBER, joinplan.MCI_CREDENTIALS_NAMESPACE)
        assert not await exists(member, resources.SERVICE_ACCOUNTS, joinplan.MCI_ACCOUNT,
                                "clusterhealth-system")
        assert not await exists(member, resources.SERVICE_ACCOUNTS, f"karmada-{MEMBER}",
                                "karmada-cluster")
        assert not await exists(member, joinplan.CLUSTER_ROLES, joinplan.member_role(MEMBER))
        assert not await exists(member, resources.SECRETS, joinplan.AGENT_SECRET,
                                "clusterhealth-system")
        listed = await member.request("GET", "/apis/apps/v1/daemonsets")
        assert not listed["items"]
        code, out, err = await cli(env, "unjoin", MEMBER, "--kubeconfig",
                                   str(join_env.kubeconfig()))
        assert code == errors.NOT_FOUND, out + err


def test_agent_rules_are_the_agent_chart_s(tmp_path: pathlib.Path) -> None:
    """join's agent identity has exactly the rules ``charts/agent --set target=controlPlane``."""
    helm = str(binaries.ensure_helm())
    proc = subprocess.run([helm, "template", "x", str(REPO / "charts/agent"), "--set",
                           "target=controlPlane", "--set", f"clusterName={MEMBER}"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    (role,) = [d for d in yaml.safe_load_all(proc.stdout) if d and d["kind"] == "ClusterRole"]
    assert role["metadata"]["name"] == joinplan.agent_role(MEMBER)
    assert role["rules"] == joinplan.agent_rules(MEMBER)
