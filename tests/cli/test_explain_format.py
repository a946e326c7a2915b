"""``explain cluster`` without a server: objects in, explanation and text out, as tables."""

from __future__ import annotations

import datetime
import json
from typing import Any

import clikit
import pytest

from clusterhealth_cli import explain

DNS = clikit.DNS
TC = clikit.TC
NOT_READY = "cluster.karmada.io/not-ready"
NOW = datetime.datetime(2026, 3, 1, 12, 0, 0, tzinfo=datetime.UTC)


def entry(manager: str, conditions: dict[str, Any], operation: str = "Apply",
          time: str = "2026-03-01T11:50:00Z") -> dict[str, Any]:
    return {"manager": manager, "operation": operation, "subresource": "status", "time": time,
            "fieldsV1": {"f:status": {"f:conditions": conditions}}}


def key(ctype: str) -> str:
    return 'k:' + json.dumps({"type": ctype}, separators=(',', ':'))


FULL = {".": {}, "f:lastTransitionTime": {}, "f:message": {}, "f:reason": {}, "f:status": {},
        "f:type": {}}


def condition(ctype: str, status: str, when: str = "2026-03-01T11:50:00Z",
              reason: str = "Test", message: str = "") -> dict[str, str]:
    return {"type": ctype, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": when}


def cluster(name: str = "member1", conditions: list[dict[str, str]] | None = None,
            managed: list[dict[str, Any]] | None = None, taints: list[dict[str, Any]] | None = None,
            **status: Any) -> dict[str, Any]:
    return {"kind": "Cluster", "metadata": {"name": name, "managedFields": managed or []},
            "spec": {"taints": taints or []},
            "status": {"conditions": conditions or [], **status}}


remedy = clikit.remedy


def binding(name: str, clusters: tuple[str, ...] = ("member1",),
            tolerations: list[dict[str, Any]] | None = None,
            tasks: list[dict[str, Any]] | None = None, namespace: str = "default",
            **metadata: Any) -> dict[str, Any]:
    kind = "ResourceBinding" if namespace else "ClusterResourceBinding"
    return {"kind": kind, "metadata": {"name": name, "namespace": namespace, **metadata},
            "spec": {"clusters": [{"name": c, "replicas": 1} for c in clusters],
                     "placement": {"clusterTolerations": tolerations or []},
                     "gracefulEvictionTasks": tasks or []}}


def taint(key_: str = NOT_READY, effect: str = "NoExecute",
          added: str = "2026-03-01T11:55:00Z") -> dict[str, Any]:
    return {"key": key_, "effect": effect, "timeAdded": added}


# --- who wrote each condition ----------------------------------------------------------------

WRITERS = [
    ("one manager per condition",
     [entry("agent", {key(DNS): FULL}), entry("cp", {key("Ready"): FULL})],
     {DNS: ["agent"], "Ready": ["cp"]}),
    ("the owner of status first, then the others",
     [entry("other", {key(DNS): {"f:message": {}}}), entry("agent", {key(DNS): FULL})],
     {DNS: ["agent", "other"], "Ready": []}),
    ("an atomic list (Karmada's Cluster API): its owner wrote every condition",
     [entry("karmada-controller-manager", {}, operation="Update")],
     {DNS: ["karmada-controller-manager"], "Ready": ["karmada-controller-manager"]}),
    ("entries about other fields are not writers",
     [{"manager": "remedy", "operation": "Apply",
       "fieldsV1": {"f:status": {"f:remedyActions": {}}}}, entry("agent", {key(DNS): FULL})],
     {DNS: ["agent"], "Ready": []}),
    ("no managedFields", [], {DNS: [], "Ready": []}),
    ("an unreadable key is skipped", [entry("x", {"k:{not json": FULL})], {DNS: [], "Ready": []}),
]


@pytest.mark.parametrize(("managed", "expected"), [w[1:] for w in WRITERS],
                         ids=[w[0] for w in WRITERS])
def test_condition_writers(managed: list[dict[str, Any]], expected: dict[str, list[str]]) -> None:
    obj = cluster(conditions=[condition(DNS, "False"), condition("Ready", "True")],
                  managed=managed)
    views = {c.type: [w.manager for w in c.writers] for c in explain.conditions(obj)}
    assert views == expected


def test_writer_text() -> None:
    obj = cluster(conditions=[condition(DNS, "False")],
                  managed=[entry("agent", {key(DNS): FULL}),
                           entry("helper", {key(DNS): {"f:message": {}}}, operation="Update")])
    text = explain.render_text(explain.build(explain.Snapshot(obj, [], [], []), NOW, 600), NOW)
    assert "written by agent (Apply, status subresource, 2026-03-01T11:50:00Z)\n" in text
    assert ("also owned by helper (Update, status subresource, 2026-03-01T11:50:00Z); "
            "owns message only\n") in text
    atomic = cluster(conditions=[condition(DNS, "False")],
                     managed=[entry("karmada", {}, operation="Update")])
    text = explain.render_text(explain.build(explain.Snapshot(atomic, [], [], []), NOW, 600),
                               NOW)
    assert "owns the whole conditions list (atomic on this API)" in text


# --- when bindings leave a tainted cluster ----------------------------------------------------

FOREVER = [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute"}]
FOR_300 = [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute",
            "tolerationSeconds": 300}]
FOR_60 = [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute",
           "tolerationSeconds": 60}]

OUTLOOK = [
    # (id, ready, taints, tolerations, expected (immediately, evict_at, why) or None)
    ("not tolerated: at once", "False", [taint()], None,
     (True, None, f"taint {NOT_READY}:NoExecute is not tolerated")),
    ("tolerated for 300s: timeAdded + 300s", "False", [taint()], FOR_300,
     (False, "2026-03-01T12:00:00Z", f"taint {NOT_READY}:NoExecute tolerated for 300s")),
    ("tolerated for 60s: overdue", "False", [taint()], FOR_60,
     (False, "2026-03-01T11:56:00Z", f"taint {NOT_READY}:NoExecute tolerated for 60s")),
    ("tolerated for ever", "False", [taint()], FOREVER,
     (False, None, "every NoExecute taint is tolerated for ever")),
    ("NoSchedule evicts nothing", "False", [taint(effect="NoSchedule")], None, None),
    ("a not-ready taint on a Ready cluster is on its way out", "True", [taint()], None, None),
    ("a policy's taint stands whatever Ready says", "True", [taint("example.com/maint")], None,
     (True, None, "taint example.com/maint:NoExecute is not tolerated")),
]


@pytest.mark.parametrize(("ready", "taints", "tolerations", "expected"),
                         [o[1:] for o in OUTLOOK], ids=[o[0] for o in OUTLOOK])
def test_outlook(ready: str, taints: list[dict[str, Any]],
                 tolerations: list[dict[str, Any]] | None,
                 expected: tuple[bool, str | None, str] | None) -> None:
    obj = cluster(conditions=[condition("Ready", ready)], taints=taints)
    found = explain.outlook(obj, [binding("web", tolerations=tolerations),
                                  binding("elsewhere", clusters=("member2",)),
                                  binding("going", deletionTimestamp="2026-03-01T11:00:00Z")])
    if expected is None:
        assert found == ()
        return
    # not the binding scheduled elsewhere, nor the one being deleted (the taint manager skips it)
    assert [(b.name, b.immediately, b.evict_at, b.why) for b in found] == [("web", *expected)]


def test_outlook_text_and_order() -> None:
    obj = cluster(conditions=[condition("Ready", "False")], taints=[taint()])
    bindings = [binding("forever", tolerations=FOREVER), binding("later", tolerations=FOR_300),
                binding("now"), binding("crb", namespace="", tolerations=FOR_60)]
    moment = datetime.datetime(2026, 3, 1, 11, 58, 0, tzinfo=datetime.UTC)
    text = explain.render_text(explain.build(explain.Snapshot(obj, [], [], bindings), moment,
                                             600), moment)
    section = text.split("Bindings scheduled here and when they leave:\n")[1].split("\n\n")[0]
    assert section.splitlines() == [
        f"  default/now (ResourceBinding): evicted as soon as the taint manager acts: taint "
        f"{NOT_READY}:NoExecute is not tolerated",
        "  crb (ClusterResourceBinding): due since 2026-03-01T11:56:00Z (2m ago): taint "
        f"{NOT_READY}:NoExecute tolerated for 60s",
        "  default/later (ResourceBinding): evicted at 2026-03-01T12:00:00Z (in 2m): taint "
        f"{NOT_READY}:NoExecute tolerated for 300s",
        "  default/forever (ResourceBinding): stays: every NoExecute taint is tolerated for ever",
    ]
    assert ("  cluster.karmada.io/not-ready:NoExecute  added 2026-03-01T11:55:00Z (3m ago)\n"
            "    bindings scheduled here that do not tolerate it are evicted") in text


def test_no_standing_taint_counts_the_bindings() -> None:
    obj = cluster(conditions=[condition("Ready", "True")], taints=[taint()])
    text = explain.render_text(explain.build(
        explain.Snapshot(obj, [], [], [binding("a"), binding("b", clusters=("member2",))]),
        NOW, 600), NOW)
    assert ("  1 binding(s) scheduled here; no standing NoExecute taint, so none is evicted"
            in text)
    assert "being removed: Ready is True again, so it evicts nothing" in text


def test_storm_guard() -> None:
    obj = cluster(conditions=[condition("Ready", "False"),
                              condition("EvictionStormGuard", "True",
                                        message="3 of 4 clusters (75%) are unhealthy")],
                  taints=[taint()])
    text = explain.render_text(explain.build(explain.Snapshot(obj, [], [], []), NOW, 600), NOW)
    assert ("evictions are held by the storm guard (EvictionStormGuard): 3 of 4 clusters "
            "(75%) are unhealthy") in text


# --- graceful-eviction tasks away from the cluster ----------------------------------------------

def task(**fields: Any) -> dict[str, Any]:
    return {"fromCluster": "member1", "reason": "TaintUntolerated", "producer": "TaintManager",
            "purgeMode": "Gracefully", "creationTimestamp": "2026-03-01T11:56:00Z", **fields}


EVICTIONS = [
    ("the controller's timeout", task(), 600.0,
     ("2026-03-01T12:06:00Z", "the controller's --graceful-eviction-timeout, taken as 600s")),
    ("another timeout given", task(), 120.0,
     ("2026-03-01T11:58:00Z", "the controller's --graceful-eviction-timeout, taken as 120s")),
    ("the task's own grace period", task(gracePeriodSeconds=30), 600.0,
     ("2026-03-01T11:56:30Z", "its gracePeriodSeconds, 30s")),
    ("kept by the user", task(suppressDeletion=True), 600.0,
     (None, "kept: suppressDeletion is true (a user holds the old copy)")),
    ("confirmed by the user", task(suppressDeletion=False), 600.0,
     (None, "ending now: suppressDeletion is false (confirmed)")),
    ("not stamped yet", {**task(), "creationTimestamp": None}, 600.0,
     (None, "not stamped yet (the graceful-eviction controller stamps it)")),
]


@pytest.mark.parametrize(("the_task", "timeout", "expected"), [e[1:] for e in EVICTIONS],
                         ids=[e[0] for e in EVICTIONS])
def test_evictions(the_task: dict[str, Any], timeout: float,
                   expected: tuple[str | None, str]) -> None:
    found = explain.evictions("member1", [
        binding("api", clusters=("member2",), tasks=[the_task, task(fromCluster="member3")]),
        binding("web", clusters=("member2",))], timeout)
    assert [(e.name, e.ends_at, e.ends_why) for e in found] == [("api", *expected)]


def test_eviction_text() -> None:
    obj = cluster()
    bindings = [binding("api", clusters=("member2",),
                        tasks=[task(message="cluster member1: taint not tolerated")])]
    text = explain.render_text(explain.build(explain.Snapshot(obj, [], [], bindings), NOW, 600),
                               NOW)
    assert ("Evicted from member1 (graceful-eviction tasks):\n"
            "  default/api (ResourceBinding): TaintUntolerated by TaintManager, created "
            "2026-03-01T11:56:00Z (4m ago), purgeMode Gracefully\n"
            "    message: cluster member1: taint not tolerated\n"
            "    the copy on member1 stays until the replacement is healthy, at the latest "
            "2026-03-01T12:06:00Z (in 6m): the controller's --graceful-eviction-timeout, "
            "taken as 600s\n") in text


# --- Remedies, traffic, notes -----------------------------------------------------------------

def test_remedies_and_their_reasons() -> None:
    obj = cluster(conditions=[condition(DNS, "False")], remedyActions=[TC],
                  remedyActionSources=[{"action": TC, "remedies": ["dns"]}])
    remedies = [remedy("dns", ["member1"]), remedy("ne", match=(DNS, "NotEqual", "False")),
                remedy("elsewhere", ["member2"]), remedy("gone", ["member3"])]
    e = explain.build(explain.Snapshot(obj, remedies, [], []), NOW, 600)
    assert e.computed_remedy_actions == (TC,)
    assert e.computed_remedy_action_sources == {TC: ("dns",)}
    assert e.notes == ()
    text = explain.render_text(e, NOW)
    assert ("Remedy actions (status.remedyActions):\n  TrafficControl  from Remedy dns\n"
            in text)
    assert ("Remedies:\n"
            f"  dns: acts because {DNS} Equal False holds: TrafficControl\n"
            f"  ne: covers it, but no decision match holds: {DNS} NotEqual False (it is False)\n"
            "  (2 other Remedies do not cover member1)\n") in text


def test_remedy_actions_not_written_yet() -> None:
    obj = cluster(conditions=[condition(DNS, "False")])
    e = explain.build(explain.Snapshot(obj, [remedy("dns")], [], []), NOW, 600)
    assert e.notes == ("the Remedies give remedyActions [TrafficControl] but the Cluster holds "
                       "[]: the remedy controller has not written it yet, is not running, or "
                       "another writer set it",)


def test_malformed_remedy_is_shown_as_ignored() -> None:
    bad = remedy("bad")
    bad["spec"]["actions"] = ["Reboot"]
    e = explain.build(explain.Snapshot(cluster(), [bad], [], []), NOW, 600)
    assert e.malformed_remedies == (
        "bad: spec.actions[0]: must be one of TrafficControl; got 'Reboot'",)
    assert "ignored by the controller (malformed): bad: spec.actions[0]" in \
        explain.render_text(e, NOW)


def test_unreadable_kinds() -> None:
    snapshot = explain.Snapshot(cluster(), None, None, None,
                                notes=("remedies (remedy.karmada.io/v1alpha1): not served",))
    e = explain.build(snapshot, NOW, 600)
    text = explain.render_text(e, NOW)
    assert "Remedies:\n  not readable (see notes)\n" in text
    assert "Bindings scheduled here and when they leave:\n  not readable (see notes)\n" in text
    assert text.endswith("Notes:\n  remedies (remedy.karmada.io/v1alpha1): not served\n")


def test_blocked_by() -> None:
    ingresses = [
        {"metadata": {"namespace": "shop", "name": "web"},
         "status": {"trafficBlockClusters": ["member1", "member2"]}},
        {"metadata": {"namespace": "shop", "name": "api"},
         "status": {"trafficBlockClusters": ["member2"]}},
        {"metadata": {"namespace": "a", "name": "z"}, "status": {"trafficBlockClusters":
                                                                 ["member1"]}},
        {"metadata": {"namespace": "a", "name": "empty"}},
    ]
    assert explain.blocked_by("member1", ingresses) == ("a/z", "shop/web")
    text = explain.render_text(explain.build(explain.Snapshot(cluster(), [], [], []), NOW, 600),
                               NOW)
    assert "  no MultiClusterIngress blocks it\n" in text


def test_json() -> None:
    obj = cluster(conditions=[condition(DNS, "False")],
                  managed=[entry("agent", {key(DNS): FULL})], taints=[taint()],
                  remedyActions=[TC], remedyActionSources=[{"action": TC, "remedies": ["dns"]}])
    e = explain.build(explain.Snapshot(obj, [remedy("dns")], [], [binding("web")]), NOW, 600)
    document = json.loads(explain.to_json(e))
    assert document["cluster"] == "member1"
    assert document["conditions"][0]["writers"][0]["manager"] == "agent"
    assert document["conditions"][0]["lastTransitionTime"] == "2026-03-01T11:50:00Z"
    assert document["remedyActionSources"] == {TC: ["dns"]}
    assert document["remedies"][0] == {
        "remedy": "dns", "covers": True, "acts": True, "matched": f"{DNS} Equal False",
        "actions": [TC], "why": f"acts because {DNS} Equal False holds: TrafficControl"}
    assert document["bindings"] == [{
        "kind": "ResourceBinding", "namespace": "default", "name": "web", "evictAt": None,
        "immediately": True, "why": f"taint {NOT_READY}:NoExecute is not tolerated"}]
    assert document["gracefulEvictionTimeout"] == 600


TIMES = [
    (0, "2026-03-01T12:00:00Z (now)"),
    (45, "2026-03-01T12:00:45Z (in 45s)"),
    (-250, "2026-03-01T11:55:50Z (4m10s ago)"),
    (3600 * 2 + 180, "2026-03-01T14:03:00Z (in 2h3m)"),
    (-86400 * 3, "2026-02-26T12:00:00Z (3d ago)"),
]


@pytest.mark.parametrize(("offset", "text"), TIMES)
def test_when(offset: int, text: str) -> None:
    moment = NOW + datetime.timedelta(seconds=offset)
    assert explain.when(moment.strftime("%Y-%m-%dT%H:%M:%SZ"), NOW) == text


def test_when_unreadable() -> None:
    assert explain.when("", NOW) == "unknown time"
    assert explain.when("yesterday", NOW) == "yesterday"
