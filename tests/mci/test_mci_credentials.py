"""Whose credentials the MCI provider reads members with (``--member-credentials``).

By default its own read-only identity: the Secret named like the Cluster in
``clusterhealth-mci-credentials`` (the local environment makes one per member,
as the chart's ``target=member`` install and the README's steps do).  A Cluster
whose own ``secretRef`` works but that has no such Secret is *not* watched,
and a Warning Event on the Cluster says which Secret to create; creating it
starts the watches.  ``--member-credentials=cluster`` uses the Cluster's own
``secretRef`` instead.  (``tests/charts/test_mci_rbac_live.py`` runs the
provider with only the chart's RBAC, and shows what the read-only credential
cannot do.)
"""

from __future__ import annotations

from typing import Any

import mcikit as k

import testkit
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment
from clusterhealth_mci import controller
from clusterhealth_mci.providers import fake


async def _cluster_like_member1(env: environment.LocalEnvironment, cp: kube.ApiClient,
                                name: str) -> None:
    """Another Cluster for member1, with member1's own (administrator) secretRef."""
    await cp.create(resources.CLUSTERS, {
        "apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"apiEndpoint": env.servers["member1"].url, "syncMode": "Push",
                 "secretRef": {"namespace": environment.CLUSTER_SECRET_NAMESPACE,
                               "name": "member1"}}})


async def test_no_credentials_of_its_own_no_watch_and_an_event_saying_which_secret(
        env: environment.LocalEnvironment, cp: kube.ApiClient,
        members: dict[str, kube.ApiClient]) -> None:
    cluster, service, name = testkit.unique("ro"), testkit.unique("ro"), testkit.unique("ro")
    namespace = environment.MCI_CREDENTIALS_NAMESPACE
    await _cluster_like_member1(env, cp, cluster)
    await k.make_service(members["member1"], service, [("10.1.0.50", 8080)])
    try:
        async with k.running_controller(cp, fake.FakeProvider(immediate_drain=True)) as run:
            await cp.create(resources.MULTI_CLUSTER_INGRESSES,
                            k.mci_body(name, service, "ro.example"))

            async def located(clusters: list[str]) -> Any:
                st = await k.mci_status(cp, name)
                return st.get("serviceLocations") == [{"name": service, "clusters": clusters}]

            async def warned() -> Any:
                events = await cp.list(resources.EVENTS, namespace="default",
                                       field_selector=f"involvedObject.name={cluster}")
                return [e for e in events["items"]
                        if e["reason"] == controller.MEMBER_NOT_WATCHED]

            await k.eventually(lambda: located(["member1"]))
            (event,) = await k.eventually(warned)
            assert event["type"] == "Warning"
            assert event["involvedObject"]["kind"] == "Cluster"
            assert event["message"].startswith(
                f"cluster {cluster}: not watched, the Secret {namespace}/{cluster} does not "
                "exist: the MCI provider reads members with a read-only identity of its own")
            assert "not watched" in run.controller.members.problems[cluster]
            assert cluster not in run.controller.members.active
            # the Cluster's own credentials were never used, though they work
            assert run.controller.members.pool.peek(cluster) is None

            reader = await cp.get(resources.SECRETS, "member1", namespace=namespace)
            await cp.create(resources.SECRETS, {
                "metadata": {"name": cluster, "namespace": namespace}, "type": "Opaque",
                "data": reader["data"]})
            await k.eventually(lambda: located(sorted(["member1", cluster])))
            assert cluster not in run.controller.members.problems
            await cp.delete(resources.MULTI_CLUSTER_INGRESSES, name, namespace="default")
            await k.eventually(lambda: k.gone(cp, name))
    finally:
        await cp.delete(resources.MULTI_CLUSTER_INGRESSES, name, namespace="default",
                        missing_ok=True)
        await cp.delete(resources.CLUSTERS, cluster, missing_ok=True)
        await cp.delete(resources.SECRETS, cluster, namespace=namespace, missing_ok=True)
        await k.delete_service(members["member1"], service)


async def test_cluster_mode_reads_with_the_clusters_own_credentials(
        env: environment.LocalEnvironment, cp: kube.ApiClient,
        members: dict[str, kube.ApiClient]) -> None:
    cluster, service, name = testkit.unique("own"), testkit.unique("own"), testkit.unique("own")
    await _cluster_like_member1(env, cp, cluster)
    await k.make_service(members["member1"], service, [("10.1.0.51", 8080)])
    settings = controller.ControllerSettings(resync_period=5, member_credentials="cluster")
    try:
        async with k.running_controller(cp, fake.FakeProvider(immediate_drain=True),
                                        settings) as run:
            await cp.create(resources.MULTI_CLUSTER_INGRESSES,
                            k.mci_body(name, service, "own.example"))

            async def located() -> Any:
                st = await k.mci_status(cp, name)
                return st.get("serviceLocations") == [
                    {"name": service, "clusters": sorted(["member1", cluster])}]

            await k.eventually(located)
            assert run.controller.members.secrets.namespace == environment.CLUSTER_SECRET_NAMESPACE
            await cp.delete(resources.MULTI_CLUSTER_INGRESSES, name, namespace="default")
            await k.eventually(lambda: k.gone(cp, name))
    finally:
        await cp.delete(resources.MULTI_CLUSTER_INGRESSES, name, namespace="default",
                        missing_ok=True)
        await cp.delete(resources.CLUSTERS, cluster, missing_ok=True)
        await k.delete_service(members["member1"], service)
