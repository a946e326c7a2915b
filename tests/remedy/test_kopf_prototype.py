"""The kopf prototype decides like our controller: its handlers against the decision module.

bench/kopf_compare.py compares the two controllers' speed and memory; that
comparison is only fair if both compute the same ``Cluster.status``.  These
tables call the prototype's kopf handlers directly (no operator, no API
server: kopf's indexes are plain mappings here, and kopf's patching function
is replaced by a recorder) and check each write against
:func:`clusterhealth_remedy.decision.decide` and, where the rule is settled,
against the literal remedyActions.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf
import pytest
from bench.kopf_remedy import handlers

from clusterhealth_core.api import remedy
from clusterhealth_remedy import decision

DNS = "ServiceDomainNameResolutionReady"
TC = "TrafficControl"
LOG = logging.getLogger("test-kopf-remedy")


def make(name: str, names: list[str] | None = None, match: tuple[str, str] | None = None
         ) -> remedy.Remedy:
    spec: dict[str, Any] = {"actions": [TC]}
    if names is not None:
        spec["clusterAffinity"] = {"clusterNames": names}
    if match is not None:
        spec["decisionMatches"] = [{"clusterConditionMatch": {
            "conditionType": DNS, "operator": match[0], "conditionStatus": match[1]}}]
    return remedy.Remedy.from_dict({"apiVersion": "remedy.karmada.io/v1alpha1",
                                    "kind": "Remedy", "metadata": {"name": name}, "spec": spec})


def cluster(name: str, dns: str | None, owned: dict[str, Any] | None = None) -> kopf.Body:
    status: dict[str, Any] = dict(owned or {})
    if dns is not None:
        status["conditions"] = [{"type": DNS, "status": dns}]
    return kopf.Body({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                      "metadata": {"name": name, "uid": f"uid-{name}"}, "status": status})


def index(*remedies: remedy.Remedy) -> dict[str, list[remedy.Remedy]]:
    return {r.metadata.name: [r] for r in remedies}


def shared() -> handlers.Shared:
    return handlers.Shared(settings=kopf.OperatorSettings(), events=False)


def ours(name: str, dns: str | None, remedies: list[remedy.Remedy]) -> dict[str, Any]:
    """What our controller writes: the owned status from the decision module."""
    conditions = {} if dns is None else {DNS: dns}
    return decision.status_patch(decision.decide(name, conditions, remedies))


TC_BY = {"remedyActions": [TC], "remedyActionSources": [{"action": TC, "remedies": ["r"]}]}

CASES = [
    pytest.param([make("r", ["c"], ("Equal", "False"))], "False", {}, [TC], id="match raises"),
    pytest.param([make("r", ["c"], ("Equal", "False"))], "True", TC_BY, [], id="no match clears"),
    pytest.param([make("r", ["c"], ("Equal", "False"))], "False", TC_BY, None,
                 id="already right: no write"),
    pytest.param([make("r", ["other"], ("Equal", "False"))], "False", {}, None,
                 id="not named: nothing"),
    pytest.param([make("r")], "True", {}, [TC], id="no decisionMatches, no affinity: immediate"),
    pytest.param([make("r", ["c"], ("NotEqual", "True"))], None, {}, None,
                 id="NotEqual on a missing condition: nothing"),
    pytest.param([make("r", ["c"], ("Equal", "False")), make("s", None, ("NotEqual", "True"))],
                 "False", {}, [TC], id="two Remedies: both sources"),
    pytest.param([], "True", {"remedyActions": [TC]}, [], id="stale actions, no Remedy: cleared"),
    pytest.param([make("r", [], ("Equal", "False"))], "False", {}, "decided",
                 id="empty clusterNames: whatever the decision module says"),
]


@pytest.mark.parametrize(("remedies", "dns", "owned", "actions"), CASES)
async def test_cluster_handler_writes_what_the_decision_module_decides(
        remedies: list[remedy.Remedy], dns: str | None, owned: dict[str, Any],
        actions: list[str] | str | None) -> None:
    patch = kopf.Patch()
    await handlers.on_cluster(type="MODIFIED", name="c", body=cluster("c", dns, owned),
                              patch=patch, remedies_index=index(*remedies), memo=shared())
    desired = ours("c", dns, remedies)
    if desired == owned:
        assert dict(patch) == {}
    else:
        assert dict(patch) == {"status": {
            "remedyActions": desired.get("remedyActions"),
            "remedyActionSources": desired.get("remedyActionSources")}}
    if isinstance(actions, list):
        assert list(desired.get("remedyActions") or []) == actions
    elif actions is None:
        assert dict(patch) == {}


def test_sources_list_every_remedy_behind_an_action() -> None:
    both = [make("r", ["c"], ("Equal", "False")), make("s", None, ("NotEqual", "True"))]
    assert ours("c", "False", both)["remedyActionSources"] == [
        {"action": TC, "remedies": ["r", "s"]}]


class Recorder:
    """Stands in for kopf's patching function: records (cluster, status merge patch)."""

    def __init__(self) -> None:
        self.patches: dict[str, dict[str, Any]] = {}

    async def __call__(self, *, name: str, patch: kopf.Patch, **_: Any) -> tuple[None, None]:
        self.patches[name] = dict(patch)["status"]
        return None, None


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    fake = Recorder()
    monkeypatch.setattr(handlers.patching, "patch_obj", fake)
    return fake


def clusters_index(*bodies: kopf.Body) -> dict[str, list[handlers.ClusterView]]:
    return {b["metadata"]["name"]: [handlers.ClusterView(
        b["metadata"]["uid"], handlers.condition_statuses(b), handlers.owned_status(b))]
        for b in bodies}


async def test_remedy_update_rewrites_old_and_new_affinity(recorder: Recorder) -> None:
    before, after = make("r", ["c1"], ("Equal", "False")), make("r", ["c2"], ("Equal", "False"))
    memo = shared()
    memo.remedies["r"] = before
    bodies = [cluster("c1", "False", TC_BY), cluster("c2", "False"), cluster("c3", "False")]
    await handlers.on_remedy(type="MODIFIED", name="r", body=kopf.Body({
        "apiVersion": "remedy.karmada.io/v1alpha1", "kind": "Remedy",
        "metadata": {"name": "r"}, "spec": {
            "clusterAffinity": {"clusterNames": ["c2"]}, "actions": [TC],
            "decisionMatches": [{"clusterConditionMatch": {
                "conditionType": DNS, "operator": "Equal", "conditionStatus": "False"}}]}}),
        logger=LOG, remedies_index=index(after), clusters_index=clusters_index(*bodies),
        memo=memo)
    assert set(recorder.patches) == {"c1", "c2"}  # c3 is covered by neither side
    for name in ("c1", "c2"):
        desired = ours(name, "False", [after])
        assert recorder.patches[name] == {"remedyActions": desired.get("remedyActions"),
                                          "remedyActionSources":
                                              desired.get("remedyActionSources")}
    assert recorder.patches["c1"]["remedyActions"] is None
    assert recorder.patches["c2"]["remedyActions"] == [TC]
    assert memo.remedies["r"] == after


async def test_remedy_deleted_clears_what_it_raised(recorder: Recorder) -> None:
    gone = make("r", None, ("Equal", "False"))
    memo = shared()
    memo.remedies["r"] = gone
    bodies = [cluster("c1", "False", TC_BY), cluster("c2", "True")]
    await handlers.on_remedy(type="DELETED", name="r", body=kopf.Body({"metadata": {"name": "r"}}),
                             logger=LOG, remedies_index={}, memo=memo,
                             clusters_index=clusters_index(*bodies))
    assert recorder.patches == {"c1": {"remedyActions": None, "remedyActionSources": None}}
    assert "r" not in memo.remedies


async def test_unchanged_spec_and_first_listing_write_nothing(recorder: Recorder) -> None:
    r = make("r", None, ("Equal", "False"))
    body = kopf.Body({"apiVersion": "remedy.karmada.io/v1alpha1", "kind": "Remedy",
                      "metadata": {"name": "r"}, "spec": {"actions": [TC], "decisionMatches": [
                          {"clusterConditionMatch": {"conditionType": DNS, "operator": "Equal",
                                                     "conditionStatus": "False"}}]}})
    bodies = clusters_index(cluster("c1", "False"))
    memo = shared()
    # the initial listing (type None): each Cluster's own listing event evaluates it
    await handlers.on_remedy(type=None, name="r", body=body, logger=LOG,
                             remedies_index=index(r), clusters_index=bodies, memo=memo)
    assert recorder.patches == {}
    # a status-only update: same spec
    await handlers.on_remedy(type="MODIFIED", name="r", body=body, logger=LOG,
                             remedies_index=index(r), clusters_index=bodies, memo=memo)
    assert recorder.patches == {}
    assert memo.remedies["r"] == r


async def test_a_cluster_already_written_is_not_written_again(recorder: Recorder) -> None:
    after = make("r", None, ("Equal", "False"))
    memo = shared()
    memo.written["c1"] = ours("c1", "False", [after])  # written, its watch event not back yet
    bodies = clusters_index(cluster("c1", "False"), cluster("c2", "False"))
    await handlers.on_remedy(type="ADDED", name="r", body=kopf.Body({
        "apiVersion": "remedy.karmada.io/v1alpha1", "kind": "Remedy", "metadata": {"name": "r"},
        "spec": {"actions": [TC], "decisionMatches": [{"clusterConditionMatch": {
            "conditionType": DNS, "operator": "Equal", "conditionStatus": "False"}}]}}),
        logger=LOG, remedies_index=index(after), clusters_index=bodies, memo=memo)
    assert set(recorder.patches) == {"c2"}
