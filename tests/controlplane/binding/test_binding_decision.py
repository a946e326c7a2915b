"""The binding controller's pure rules: Work names, manifests, targets and orphans."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from clusterhealth_controlplane import manager, vocabulary
from clusterhealth_controlplane.binding import decision
from clusterhealth_core import builder


@pytest.mark.parametrize(("kind", "name", "namespace", "expected"), [
    # computed with Karmada v1.18.2's names.GenerateWorkName (Go, same inputs)
    ("Deployment", "nginx", "default", "nginx-687f7fb96f"),
    ("ConfigMap", "my-config", "app", "my-config-74dd9fffc9"),
    ("ClusterRole", "system:Admin", "", "system.admin-7c7568b598"),
    ("Namespace", "foo", None, "foo-5dbdc7b59c"),
    ("Deployment", "Web", "ns-1", "web-85d499c9df"),
])
def test_work_name_is_karmadas(kind: str, name: str, namespace: str | None,
                               expected: str) -> None:
    assert vocabulary.work_name(kind, name, namespace) == expected


def template(replicas: int | None = 3, kind: str = "Deployment",
             api_version: str = "apps/v1") -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": "nginx", "namespace": "default", "uid": "t-uid",
                         "resourceVersion": "42", "generation": 4,
                         "creationTimestamp": "2024-01-01T00:00:00Z",
                         "managedFields": [{"manager": "kubectl"}],
                         "ownerReferences": [{"kind": "X"}],
                         "labels": {"app": "nginx",
                                    "propagationpolicy.karmada.io/permanent-id": "p"},
                         "annotations": {"note": "kept",
                                         "propagationpolicy.karmada.io/name": "pp",
                                         "propagationpolicy.karmada.io/namespace": "default"}},
            "spec": spec, "status": {"replicas": 3}}


def rb(clusters: list[tuple[str, int]], evictions: list[str] = (),  # type: ignore[assignment]
       namespace: str | None = "default") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "nginx-deployment", "uid": "rb-uid"}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta,
            "spec": {"clusters": [{"name": c, "replicas": r} for c, r in clusters],
                     "conflictResolution": "Abort",
                     "gracefulEvictionTasks": [{"fromCluster": c, "reason": "TaintUntolerated",
                                                "producer": "TaintManager"} for c in evictions]}}


def test_manifest_drops_status_bookkeeping_and_the_claim() -> None:
    body = decision.manifest(template(), 1)
    meta = body["metadata"]
    assert "status" not in body
    for key in ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields",
                "ownerReferences"):
        assert key not in meta
    assert meta["labels"] == {"app": "nginx"}
    assert meta["annotations"] == {"note": "kept"}
    assert body["spec"]["replicas"] == 1


@pytest.mark.parametrize(("obj", "replicas", "expected"), [
    (template(3), 2, 2),
    (template(None), 2, 2),  # no replicas in the template: the cluster's share is written
    (template(3, kind="StatefulSet"), 0, 0),
    (template(3, kind="ReplicaSet"), 1, 1),
    (template(3, kind="Foo", api_version="example.io/v1"), 1, 3),  # not a replica kind
])
def test_replicas_are_revised_for_replica_kinds(obj: dict[str, Any], replicas: int,
                                                expected: int | None) -> None:
    assert decision.manifest(obj, replicas)["spec"].get("replicas") == expected


def test_the_template_is_not_modified() -> None:
    obj = template()
    decision.desired_works(rb([("member1", 1)]), obj)
    assert obj["spec"]["replicas"] == 3 and obj["metadata"]["uid"] == "t-uid"


def test_desired_works_one_per_cluster_with_karmadas_links() -> None:
    works = decision.desired_works(rb([("member1", 1), ("member2", 2), ("member1", 5)]),
                                   template())
    assert [(w.cluster, w.namespace, w.manifest["spec"]["replicas"]) for w in works] == [
        ("member1", "karmada-es-member1", 1), ("member2", "karmada-es-member2", 2)]
    work = works[0]
    assert work.name == "nginx-687f7fb96f"
    assert work.labels == {vocabulary.RB_ID: "rb-uid"}
    assert work.annotations == {vocabulary.RB_NAMESPACE: "default",
                                vocabulary.RB_NAME: "nginx-deployment",
                                vocabulary.CONFLICT_RESOLUTION: "abort"}
    annotations = work.manifest["metadata"]["annotations"]
    assert annotations[vocabulary.CONFLICT_RESOLUTION] == "abort"  # Karmada puts it on both
    assert annotations[vocabulary.WORK_NAME] == "nginx-687f7fb96f"
    assert annotations[vocabulary.WORK_NAMESPACE] == "karmada-es-member1"
    assert annotations[vocabulary.TEMPLATE_UID] == "t-uid"
    assert annotations[vocabulary.TEMPLATE_GENERATION] == "4"
    assert work.manifest["metadata"]["labels"][vocabulary.MANAGED] == "true"
    body = work.body()
    assert body["kind"] == "Work" and body["spec"]["workload"]["manifests"] == [work.manifest]
    assert body["metadata"]["finalizers"] == [vocabulary.EXECUTION_FINALIZER]  # set at creation
    assert vocabulary.binding_of_work(body) == vocabulary.BindingRef(False, "default",
                                                                 "nginx-deployment")


def test_a_cluster_binding_links_by_its_name() -> None:
    obj = template(kind="Namespace", api_version="v1")
    obj["metadata"].pop("namespace")
    works = decision.desired_works(rb([("member1", 0)], namespace=None), obj)
    assert works[0].labels == {vocabulary.CRB_ID: "rb-uid"}
    assert works[0].annotations[vocabulary.CRB_NAME] == "nginx-deployment"
    assert vocabulary.binding_of_work(works[0].body()) == vocabulary.BindingRef(True, "",
                                                                            "nginx-deployment")


def test_a_binding_with_a_permanent_id_label_uses_it() -> None:
    binding = rb([("member1", 1)])
    binding["metadata"]["labels"] = {vocabulary.RB_ID: "perm"}
    assert decision.desired_works(binding, template())[0].labels == {vocabulary.RB_ID: "perm"}


def work(cluster: str) -> dict[str, Any]:
    return {"metadata": {"namespace": f"karmada-es-{cluster}", "name": "nginx-687f7fb96f"}}


@pytest.mark.parametrize(("targets", "evictions", "existing", "deleted"), [
    ([("member1", 1)], [], ["member1", "member2"], ["member2"]),
    ([("member1", 1)], ["member2"], ["member1", "member2"], []),  # eviction keeps it
    ([("member1", 1)], ["member3"], ["member1", "member2"], ["member2"]),
    ([], [], ["member1"], ["member1"]),
    ([("member1", 1), ("member2", 2)], [], ["member1", "member2"], []),
])
def test_orphans(targets: list[tuple[str, int]], evictions: list[str], existing: list[str],
                 deleted: list[str]) -> None:
    binding = rb(targets, evictions)
    desired = decision.desired_works(binding, template())
    found = decision.orphans(binding, [work(c) for c in existing], desired)
    assert [vocabulary.cluster_of(w["metadata"]["namespace"]) for w in found] == deleted


@pytest.mark.parametrize(("purge_mode", "kept"), [
    (None, True), ("Gracefully", True), ("Never", True), ("Directly", False),
    ("Immediately", False)])
def test_a_task_purged_directly_keeps_no_work(purge_mode: str | None, kept: bool) -> None:
    binding = rb([("member2", 3)], ["member1"])
    if purge_mode is not None:
        binding["spec"]["gracefulEvictionTasks"][0]["purgeMode"] = purge_mode
    desired = decision.desired_works(binding, template())
    found = decision.orphans(binding, [work("member1"), work("member2")], desired)
    assert [vocabulary.cluster_of(w["metadata"]["namespace"]) for w in found] == \
        ([] if kept else ["member1"])


def test_a_deleted_binding_orphans_every_work_even_under_eviction() -> None:
    assert len(decision.orphans(None, [work("member1"), work("member2")], ())) == 2


def test_the_work_index_follows_events() -> None:
    index = manager.work_index()
    ref = vocabulary.BindingRef(False, "default", "nginx-deployment")
    request = builder.Request("default", "nginx-deployment")
    body = decision.desired_works(rb([("member1", 1)]), template())[0].body()
    assert manager.binding_of_work(body) == request
    index.observe(builder.Event(builder.ADDED, body, None))
    assert sorted(index.on(request)) == ["karmada-es-member1/nginx-687f7fb96f"]
    assert vocabulary.BindingRef.parse(ref.key) == ref
    index.observe(builder.Event(builder.DELETED, body, None))
    assert sorted(index.on(request)) == []
    assert manager.binding_of_work({"metadata": {"namespace": "x", "name": "y"}}) is None


@pytest.mark.parametrize(("namespace", "cluster"), [
    ("karmada-es-member1", "member1"), ("karmada-es-", None), ("default", None)])
def test_cluster_of(namespace: str, cluster: str | None) -> None:
    assert vocabulary.cluster_of(namespace) == cluster


def _obj(api_version: str, kind: str, **fields: Any) -> dict[str, Any]:
    meta = fields.pop("metadata", {})
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": "web", "namespace": "demo", **meta}, **fields}


UID = "batch.kubernetes.io/controller-uid"


@pytest.mark.parametrize(("template", "expected"), [
    # a Service's cluster IPs are the control plane's; each member allocates its own
    (_obj("v1", "Service", spec={"clusterIP": "10.96.3.4", "clusterIPs": ["10.96.3.4"],
                                 "ports": [{"port": 80}]}),
     _obj("v1", "Service", spec={"ports": [{"port": 80}]})),
    # ...but "None" is a headless Service, the user's choice
    (_obj("v1", "Service", spec={"clusterIP": "None", "clusterIPs": ["None"]}),
     _obj("v1", "Service", spec={"clusterIP": "None", "clusterIPs": ["None"]})),
    (_obj("apps/v1", "Deployment", metadata={"annotations": {
        "deployment.kubernetes.io/revision": "3", "team": "a"}}, spec={}),
     _obj("apps/v1", "Deployment", metadata={"annotations": {"team": "a"}}, spec={})),
    (_obj("apps/v1", "Deployment", metadata={"annotations": {
        "deployment.kubernetes.io/revision": "3"}}, spec={}),
     _obj("apps/v1", "Deployment", spec={})),
    # a Job's generated selector names the control plane's uid: the member generates its own
    (_obj("batch/v1", "Job", spec={
        "selector": {"matchLabels": {UID: "u1"}},
        "template": {"metadata": {"labels": {UID: "u1", "batch.kubernetes.io/job-name": "web",
                                             "controller-uid": "u1", "job-name": "web",
                                             "app": "web"}}}}),
     _obj("batch/v1", "Job", spec={"selector": {"matchLabels": {}},
                                   "template": {"metadata": {"labels": {"app": "web"}}}})),
    (_obj("batch/v1", "Job", spec={"manualSelector": True,
                                   "selector": {"matchLabels": {UID: "mine"}}}),
     _obj("batch/v1", "Job", spec={"manualSelector": True,
                                   "selector": {"matchLabels": {UID: "mine"}}})),
    (_obj("v1", "ServiceAccount", secrets=[{"name": "web-token-abcde"}, {"name": "pull"}]),
     _obj("v1", "ServiceAccount", secrets=[{"name": "pull"}])),
    (_obj("v1", "Secret", type="kubernetes.io/service-account-token",
          metadata={"annotations": {"kubernetes.io/service-account.name": "web",
                                    "kubernetes.io/service-account.uid": "u2"}},
          data={"token": "dA=="}),
     _obj("v1", "Secret", type="kubernetes.io/service-account-token",
          metadata={"annotations": {"kubernetes.io/service-account.name": "web"}})),
    (_obj("v1", "Secret", type="Opaque", data={"k": "dg=="}),
     _obj("v1", "Secret", type="Opaque", data={"k": "dg=="})),
    (_obj("v1", "PersistentVolumeClaim", metadata={"annotations": {
        "volume.kubernetes.io/selected-node": "node-1", "x": "y"}}),
     _obj("v1", "PersistentVolumeClaim", metadata={"annotations": {"x": "y"}})),
    # the same kind name in another group is not touched
    (_obj("example.com/v1", "Service", spec={"clusterIP": "1.2.3.4"}),
     _obj("example.com/v1", "Service", spec={"clusterIP": "1.2.3.4"})),
])
def test_manifest_leaves_out_what_each_member_fills_in(template: dict[str, Any],
                                                       expected: dict[str, Any]) -> None:
    original = copy.deepcopy(template)
    assert decision.manifest(template, None) == expected
    assert template == original  # the template itself is not changed


@pytest.mark.parametrize(("policy", "on_template", "expected"), [
    (None, None, "abort"),                       # the default: never take over
    ("Abort", None, "abort"),
    ("Overwrite", None, "overwrite"),
    ("Overwrite", "abort", "abort"),             # the template's own annotation wins
    ("Abort", "overwrite", "overwrite"),
    ("Overwrite", "Overwrite", "overwrite"),     # not a valid value there: ignored
    (None, "yes", "abort"),
])
def test_conflict_resolution_is_karmadas(policy: str | None, on_template: str | None,
                                         expected: str) -> None:
    binding = rb([("member1", 1)])
    del binding["spec"]["conflictResolution"]
    if policy:
        binding["spec"]["conflictResolution"] = policy
    obj = template()
    if on_template:
        obj["metadata"]["annotations"] = {vocabulary.CONFLICT_RESOLUTION: on_template}
    work = decision.desired_works(binding, obj)[0]
    assert work.annotations[vocabulary.CONFLICT_RESOLUTION] == expected
    assert work.manifest["metadata"]["annotations"][vocabulary.CONFLICT_RESOLUTION] == expected


def _bound(namespace: str | None, resource_namespace: str | None) -> dict[str, Any]:
    binding = rb([("member1", 1)], namespace=namespace)
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": "settings"}
    if resource_namespace is not None:
        reference["namespace"] = resource_namespace
    binding["spec"]["resource"] = reference
    return binding


@pytest.mark.parametrize(("namespace", "resource_namespace", "reason", "says"), [
    ("team-a", "team-a", None, None),
    ("team-a", "team-b", decision.REFUSED_CROSS_NAMESPACE,
     "names ConfigMap team-b/settings, in namespace team-b"),
    ("team-a", "kube-system", decision.REFUSED_CROSS_NAMESPACE, "of its own namespace (team-a)"),
    ("team-a", None, decision.REFUSED_CROSS_NAMESPACE, "no namespace (cluster-scoped)"),
    ("team-a", "", decision.REFUSED_CROSS_NAMESPACE, "no namespace (cluster-scoped)"),
    ("karmada-cluster", "karmada-cluster", decision.REFUSED_PROTECTED_NAMESPACE,
     "never a source of templates"),
    (None, "karmada-cluster", decision.REFUSED_PROTECTED_NAMESPACE, "member credentials"),
    (None, "karmada-es-member1", decision.REFUSED_PROTECTED_NAMESPACE, "Works"),
    (None, "team-b", None, None),                 # a ClusterResourceBinding: an admin's
    (None, None, None, None),
])
def test_a_binding_propagates_only_what_its_namespace_may(
        namespace: str | None, resource_namespace: str | None, reason: str | None,
        says: str | None) -> None:
    found = decision.refusal(_bound(namespace, resource_namespace), "karmada-cluster")
    if reason is None:
        assert found is None
    else:
        assert found is not None and found.reason == reason
        assert says is not None and says in found.message
        assert "nothing of it is propagated" in found.message



def _applied(desired: decision.DesiredWork) -> dict[str, Any]:
    """The Work as the API server holds it after our apply (plus what it adds)."""
    body = copy.deepcopy(desired.body())
    body["metadata"].update(uid="w-uid", resourceVersion="7", generation=1)
    body["status"] = {"conditions": [{"type": "Applied", "status": "True"}]}
    return body


def _manifest(work: dict[str, Any]) -> dict[str, Any]:
    manifest: dict[str, Any] = work["spec"]["workload"]["manifests"][0]
    return manifest


CARRIED_TABLE: list[tuple[str, Any, bool]] = [
    ("as applied, with status and bookkeeping", lambda w: None, True),
    ("being deleted", lambda w: w["metadata"].update(deletionTimestamp="now"), False),
    ("our label dropped by hand", lambda w: w["metadata"]["labels"].pop(vocabulary.RB_ID),
     False),
    ("someone else's label added", lambda w: w["metadata"]["labels"].update(team="a"), True),
    ("our annotation changed", lambda w: w["metadata"]["annotations"].update(
        {vocabulary.CONFLICT_RESOLUTION: "overwrite"}), False),
    ("our finalizer missing", lambda w: w["metadata"].update(finalizers=["other"]), False),
    ("our finalizer among others", lambda w: w["metadata"].update(
        finalizers=["other", vocabulary.EXECUTION_FINALIZER]), True),
    ("the manifest edited by hand", lambda w: _manifest(w)["spec"].update(paused=True), False),
    ("a manifest field dropped by hand", lambda w: _manifest(w)["spec"].pop("replicas"), False),
    ("a spec field that is not ours", lambda w: w["spec"].update(suspendDispatching=True),
     True),
]


@pytest.mark.parametrize(("edit", "carried"), [pytest.param(e, c, id=i)
                                               for i, e, c in CARRIED_TABLE])
def test_a_work_is_applied_only_when_it_differs(edit: Any, carried: bool) -> None:
    desired = decision.desired_works(rb([("member1", 1)]), template())[0]
    current = _applied(desired)
    edit(current)
    assert decision.carried(desired.body(), current) is carried


def test_a_work_not_in_the_cache_is_applied() -> None:
    desired = decision.desired_works(rb([("member1", 1)]), template())[0]
    assert decision.carried(desired.body(), None) is False


def test_new_replicas_are_not_carried_by_the_old_work() -> None:
    before = decision.desired_works(rb([("member1", 1)]), template())[0]
    after = decision.desired_works(rb([("member1", 2)]), template())[0]
    assert decision.carried(after.body(), _applied(before)) is False
    assert decision.carried(after.body(), _applied(after)) is True
