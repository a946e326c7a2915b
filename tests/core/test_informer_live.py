"""Informers against a real API server that says no: RBAC allows list, not watch.

The audit log is the witness: the informer must not relist in a loop (it
lists once and keeps retrying the watch from where it was), and the retries
must slow down, not hammer the server twice a second forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid

from clusterhealth_core import retry
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config, errors, informer, resources
from clusterhealth_localenv import elector, environment

NAMESPACE = "default"


async def list_only_client(env: environment.LocalEnvironment, account: str) -> kube.ApiClient:
    """A client whose ServiceAccount may list ConfigMaps in ``default`` but not watch them."""
    async with env.client() as api:
        await api.create(elector.ROLES, {
            "metadata": {"name": account, "namespace": NAMESPACE},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]})
        await api.create(elector.ROLE_BINDINGS, {
            "metadata": {"name": account, "namespace": NAMESPACE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]})
        with contextlib.suppress(errors.Conflict):
            await api.create(resources.SERVICE_ACCOUNTS,
                             {"metadata": {"name": account, "namespace": NAMESPACE}})
        token = await elector.service_account_token(api, NAMESPACE, account)
    server = env.servers[environment.CONTROL_PLANE]
    return kube.ApiClient(config.Credentials(server=server.url, ca_data=env.ca.cert_pem,
                                             token=token), environ={})


async def test_a_forbidden_watch_is_retried_ever_more_slowly_without_relisting(
        audited_env: environment.LocalEnvironment) -> None:
    account = f"list-only-{uuid.uuid4().hex[:6]}"
    api = await list_only_client(audited_env, account)
    settings = informer.InformerSettings(
        backoff=retry.Backoff(initial=0.1, factor=2.0, maximum=10.0, jitter=0.2,
                              attempts=1_000_000))
    cache = informer.Informer(api, resources.CONFIGMAPS, namespace=NAMESPACE,
                              settings=settings)
    task = asyncio.create_task(cache.run())
    try:
        async with asyncio.timeout(10):
            await cache.wait_synced()  # the list is allowed
        await asyncio.sleep(6.5)  # 0.1 + 0.2 + 0.4 + 0.8 + 1.6 + 3.2 s of backoff
        healthy, detail = cache.health()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()
    user = f"system:serviceaccount:{NAMESPACE}:{account}"
    mine = [e for e in audited_env.audit_events()
            if e["user"]["username"] == user and e.get("objectRef", {}).get("resource")
            == "configmaps" and e["stage"] == "ResponseComplete"]
    lists = [e for e in mine if e["verb"] == "list"]
    watches = [e for e in mine if e["verb"] == "watch"]
    assert len(lists) == 1, [e["requestURI"] for e in lists]  # no relist loop
    assert all(e["responseStatus"]["code"] == 403 for e in watches)
    assert 4 <= len(watches) <= 8, len(watches)  # twice a second would be ~13
    times = [environment.audit_time(e).timestamp() for e in watches]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(b > a for a, b in itertools.pairwise(gaps)), gaps  # slowing down
    assert healthy, detail  # the list was recent: not yet stale (after 2 min it would be)

