"""A member behind an HTTP CONNECT proxy: Karmada's ``Cluster.spec.proxyURL`` + ``proxyHeader``.

A real tinyproxy demanding basic authentication sits between the MCI
controller process (``python -m clusterhealth_mci``) and member2's API
server.  A Cluster ``via-proxy-…`` reaches member2 only through it; the
controller must discover the member's Services there (``serviceLocations``
lists the Cluster), and tinyproxy's log must show the member traffic went
through the proxy.  Without ``proxyHeader`` the proxy refuses (407) and the
Cluster locates nothing; adding the header restarts the member's watches.
"""

from __future__ import annotations

import base64
import pathlib
import sys
from collections.abc import AsyncIterator
from typing import Any

import mcikit as k
import pytest

import testkit
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment, processes, proxy

NAMESPACE = environment.MCI_CREDENTIALS_NAMESPACE
"""The provider's own (read-only) member credentials, one Secret named like each Cluster."""


@pytest.fixture
async def controller_process(env: environment.LocalEnvironment, python_env: dict[str, str],
                             tmp_path: pathlib.Path) -> AsyncIterator[processes.ManagedProcess]:
    proc = processes.ManagedProcess("clusterhealth_mci", [
        sys.executable, "-m", "clusterhealth_mci", "--kubeconfig", str(env.kubeconfig()),
        "--leader-elect", "false", "--provider", "fake", "--resync-period", "1h",
        "--bind-address", "127.0.0.1", "--healthz-port", "0"], tmp_path / "mci.log",
        env=python_env)
    proc.start()
    try:
        yield proc
    finally:
        await proc.stop()


async def test_member_behind_a_connect_proxy(
        env: environment.LocalEnvironment, cp: kube.ApiClient,
        members: dict[str, kube.ApiClient], tmp_path: pathlib.Path,
        controller_process: processes.ManagedProcess) -> None:
    member = env.servers["member2"]
    target = f"{member.host}:{member.port}"
    cluster, service = testkit.unique("via-proxy"), testkit.unique("behind")
    name = testkit.unique("proxied")
    reader = await cp.get(resources.SECRETS, "member2", namespace=NAMESPACE)
    await cp.create(resources.SECRETS, {
        "metadata": {"name": cluster, "namespace": NAMESPACE}, "type": "Opaque",
        "data": {"caBundle": base64.b64encode(env.ca.cert_pem).decode(),
                 "token": reader["data"]["token"]}})
    await k.make_service(members["member2"], service, [("10.2.0.30", 8080)])
    with proxy.TinyProxy(tmp_path / "proxy", basic_auth=("karmada", "s3cret")) as tiny:
        header = tiny.proxy_authorization
        assert header is not None
        await cp.create(resources.CLUSTERS, {
            "apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
            "metadata": {"name": cluster},
            "spec": {"apiEndpoint": member.url, "syncMode": "Push", "proxyURL": tiny.url,
                     "secretRef": {"namespace": environment.CLUSTER_SECRET_NAMESPACE,
                                   "name": "member2"}}})
        try:
            await cp.create(resources.MULTI_CLUSTER_INGRESSES,
                            k.mci_body(name, service, "proxied.example"))

            async def located(clusters: list[str]) -> Any:
                status = await k.mci_status(cp, name)
                return status.get("serviceLocations") == [
                    {"name": service, **({"clusters": clusters} if clusters else {})}]

            # The proxy wants credentials: it refuses the controller's CONNECTs (407).
            await k.eventually(lambda: located(["member2"]))
            await k.eventually(lambda: _async(target in tiny.connect_targets()))
            assert member.host not in tiny.established_hosts()

            # Karmada's proxyHeader carries them: the member is watched through the proxy.
            await cp.patch(resources.CLUSTERS, cluster, {"spec": {"proxyHeader": {
                "Proxy-Authorization": header}}})
            await k.eventually(lambda: located(["member2", cluster]))
            assert tiny.established_hosts().count(member.host) >= 2  # Services + EndpointSlices

            # The watches stay on the tunnels: the Service leaving member2 is seen for the
            # proxied Cluster too (its cache hears only what comes through the proxy).
            await k.delete_service(members["member2"], service)
            await k.eventually(lambda: located([]))
            assert controller_process.running()
        finally:
            await cp.delete(resources.MULTI_CLUSTER_INGRESSES, name, namespace="default",
                            missing_ok=True)
            await k.eventually(lambda: k.gone(cp, name))
            await cp.delete(resources.CLUSTERS, cluster, missing_ok=True)
            await cp.delete(resources.SECRETS, cluster, namespace=NAMESPACE, missing_ok=True)
            await k.delete_service(members["member2"], service)


async def _async(value: bool) -> bool:
    return value
