"""A Remedy with ``conditionStatus: "false"`` is refused everywhere a user can look.

Our CRD refuses it (``tests/crds``); a control plane may still hold one: Karmada's
CRD has no enum, and ours may have been tightened after the Remedy was stored
(the API server's ratcheting keeps an unchanged invalid field).  The controller
then lets it act nowhere -- ``NotEqual "false"`` would hold on every cluster --
and says so: ``Effective=False`` (reason ``InvalidRemedy``) where Remedies have
a status, and a Warning Event naming the field and the value it means.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import remedykit as k

import testkit
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment

Start = Callable[..., k.Controller]
ENUM_PATH = ("/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/"
             "decisionMatches/items/properties/clusterConditionMatch/properties/"
             "conditionStatus/enum")


@contextlib.asynccontextmanager
async def crd_without_enum(cp: kube.ApiClient) -> AsyncIterator[None]:
    """Our Remedy CRD as it was before the enum, for as long as the block runs."""
    name = resources.REMEDIES.crd_name
    enum = ["True", "False", "Unknown"]
    await cp.patch(resources.CRDS, name, [{"op": "remove", "path": ENUM_PATH}],
                   patch_type="json")
    try:
        yield
    finally:
        await cp.patch(resources.CRDS, name, [{"op": "add", "path": ENUM_PATH, "value": enum}],
                       patch_type="json")


async def _make_lowercase(cp: kube.ApiClient, name: str, cluster: str) -> None:
    """Create the lowercase Remedy once the API server validates with the schema patched.

    The CRD's new schema takes effect a moment after the patch (the API server's CRD
    handler rebuilds its validation when its informer sees the change): until then the
    old enum refuses the Remedy.
    """
    async def created() -> bool:
        try:
            await k.make_remedy(cp, name, [cluster], (k.DNS, "NotEqual", "false"))
        except errors.Invalid as exc:
            if 'Unsupported value: "false"' in str(exc):
                return False  # the old enum still applies: again
            raise
        return True
    await k.eventually(created, timeout=30, not_yet=(),
                       what="the lowercase Remedy created with the patched schema")


async def _warning(cp: kube.ApiClient, remedy: str) -> str | None:
    events = await cp.list(resources.EVENTS, namespace="default",
                           field_selector=f"involvedObject.name={remedy}")
    found = [e["message"] for e in events["items"] if e["reason"] == "InvalidRemedy"]
    return found[0] if found else None


async def _effective(cp: kube.ApiClient, remedy: str) -> dict[str, Any] | None:
    st = (await cp.get(resources.REMEDIES, remedy)).get("status") or {}
    found = next((c for c in st.get("conditions") or [] if c["type"] == "Effective"), None)
    return found if found is not None and found["status"] == "False" else None


@pytest.mark.planes("ours", "karmada")
async def test_lowercase_status_is_refused_by_the_controller(
        controllers: Start, plane: environment.LocalEnvironment, cp: kube.ApiClient,
        cleanup: dict[str, list[str]]) -> None:
    cluster = testkit.unique("inv")
    await testkit.make_cluster(cp, cluster)
    cleanup["clusters"].append(cluster)
    await k.set_condition(cp, cluster, "True")
    name = testkit.unique("lowercase")
    if plane.is_karmada:
        await k.make_remedy(cp, name, [cluster], (k.DNS, "NotEqual", "false"))
    else:
        async with crd_without_enum(cp):
            await _make_lowercase(cp, name, cluster)
    cleanup["remedies"].append(name)
    controllers()
    message = await k.eventually(lambda: _warning(cp, name))
    assert "conditionStatus" in message and "did you mean 'False'" in message, message
    if not plane.is_karmada:  # Karmada's Remedy has no status
        effective = await k.eventually(lambda: _effective(cp, name))
        assert effective["reason"] == "InvalidRemedy"
        assert "did you mean 'False'" in effective["message"]
    # NotEqual "false" would hold everywhere: the Remedy acts nowhere
    assert await k.actions(cp, cluster) == []
    # fixed, it acts as written
    await cp.patch(resources.REMEDIES, name, {"spec": {"decisionMatches": [
        {"clusterConditionMatch": {"conditionType": k.DNS, "operator": "NotEqual",
                                   "conditionStatus": "True"}}]}})
    await k.set_condition(cp, cluster, "False")
    await k.eventually(lambda: _has_tc(cp, cluster))


async def _has_tc(cp: kube.ApiClient, cluster: str) -> bool:
    return await k.actions(cp, cluster) == ["TrafficControl"]
