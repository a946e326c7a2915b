"""The demo's pure parts: what it prints, the Pods' servers' decisions, its flags."""

from __future__ import annotations

from collections import Counter

import pytest

from clusterhealth_controlplane import settings as cp_settings
from clusterhealth_core import settings
from clusterhealth_localenv import demo, demoview, podservers

RANGES = {"member1": "198.19.1.0/24", "member2": "198.19.2.0/24"}


def _cluster(conditions: dict[str, tuple[str, str]], actions: list[str] | None = None,
             taints: list[tuple[str, str]] | None = None) -> dict[str, object]:
    return {"metadata": {"name": "member1"},
            "spec": {"taints": [{"key": k, "effect": e} for k, e in taints or []]},
            "status": {"conditions": [{"type": t, "status": s, "reason": r, "message": "m"}
                                      for t, (s, r) in conditions.items()],
                       "remedyActions": actions or []}}


def test_cluster_changes_name_each_field_that_changed() -> None:
    before = demoview.cluster_view(_cluster({"Ready": ("True", "ClusterReady")}))
    after = demoview.cluster_view(_cluster(
        {"Ready": ("False", "ClusterNotReachable"), demoview.DNS_CONDITION: ("True", "Ok")},
        ["TrafficControl"], [("cluster.karmada.io/not-ready", "NoSchedule")]))
    assert demoview.cluster_changes(before, after) == [
        "condition Ready: True (ClusterReady) -> False (ClusterNotReachable)",
        "condition ServiceDomainNameResolutionReady: absent -> True (Ok)",
        "remedyActions: - -> TrafficControl",
        "taints: - -> cluster.karmada.io/not-ready:NoSchedule",
    ]
    assert demoview.cluster_changes(after, after) == []


def test_a_changed_message_alone_is_not_a_change() -> None:
    one = _cluster({"Ready": ("True", "ClusterReady")})
    other = _cluster({"Ready": ("True", "ClusterReady")})
    other["status"]["conditions"][0]["message"] = "probed again"  # type: ignore[index]
    assert demoview.cluster_changes(demoview.cluster_view(one),
                                    demoview.cluster_view(other)) == []


@pytest.mark.parametrize(("obj", "expected"), [
    (None, None),
    ({"metadata": {"generation": 2}, "spec": {"replicas": 3},
      "status": {"observedGeneration": 2, "availableReplicas": 3, "replicas": 3}}, 3),
    ({"metadata": {"generation": 2}, "spec": {"replicas": 3},
      "status": {"observedGeneration": 1, "availableReplicas": 3, "replicas": 3}}, -1),
    ({"metadata": {"generation": 2}, "spec": {"replicas": 2},  # scaling down: 3 still run
      "status": {"observedGeneration": 2, "availableReplicas": 2, "replicas": 3}}, -1),
    ({"metadata": {"generation": 1}, "spec": {"replicas": 1}, "status": {}}, -1),
])
def test_deployment_settled(obj: dict[str, object] | None, expected: int | None) -> None:
    assert demoview.deployment_settled(obj) == expected


STAT = (
    "# pxname,svname,qcur,scur,status,addr,wretr,wredis\n"
    "mci,FRONTEND,,0,OPEN,,,\n"
    "mci_slot_0,s1,0,0,no check,198.19.1.5:8080,0,0\n"
    "mci_slot_0,s2,0,1,DRAIN,198.19.2.7:8080,0,0\n"
    "mci_slot_0,s3,0,0,no check,198.19.2.8:8080,0,0\n"
    "mci_slot_0,s4,0,0,MAINT,0.0.0.0:1,0,0\n"
    "mci_slot_0,s5,0,0,MAINT,198.19.1.9:8080,0,0\n"
    "mci_slot_0,BACKEND,0,1,UP,,2,1\n"
    "mci_slot_1,BACKEND,0,0,DOWN,,1,0\n"
    "mci_default,BACKEND,0,0,UP,,5,5\n"
)


def test_haproxy_servers_per_member_and_retries() -> None:
    rows = demoview.parse_stat(STAT)
    states = demoview.servers_by_cluster(rows, RANGES)
    assert states == {"member1": Counter({"up": 1, "maint": 1}),
                      "member2": Counter({"draining": 1, "up": 1})}
    assert demoview.taking_traffic(states, "member1") == 1
    assert demoview.taking_traffic(states, "member3") == 0
    assert demoview.haproxy_line(states) == "member1 1 up, member2 1 up + 1 draining"
    assert demoview.retries(rows) == (3, 1)  # the slots' backends only
    assert demoview.parse_stat("") == []


@pytest.mark.parametrize(("status", "word"), [
    ("no check", "up"), ("UP", "up"), ("UP 1/3", "up"), ("DRAIN", "draining"),
    ("DRAIN (agent)", "draining"), ("MAINT", "maint"), ("MAINT (resolution)", "maint"),
    ("DOWN", "down"), ("", "?")])
def test_server_state(status: str, word: str) -> None:
    assert demoview.server_state(status) == word


@pytest.mark.parametrize(("address", "cluster"), [
    ("198.19.1.5:8080", "member1"), ("198.19.1.5", "member1"), ("198.19.2.200:80", "member2"),
    ("198.19.12.1:80", None), ("0.0.0.0:1", None), ("", None), ("no-ip:80", None)])
def test_cluster_of(address: str, cluster: str | None) -> None:
    assert demoview.cluster_of(address, {**RANGES, "member11": "198.19.11.0/24"}) == cluster


def test_traffic_counts_and_line() -> None:
    answers = [(1.0, "member1/web-a"), (1.1, "member2/web-b"), (1.2, "member2/web-c")]
    counts = demoview.answers_by_cluster(answers, ["member1", "member2"])
    assert counts == {"member1": 1, "member2": 2}
    assert demoview.answers_by_cluster([], ["member1", "member2"]) == {"member1": 0,
                                                                       "member2": 0}
    assert demoview.traffic_line(5, counts, 0, 100, 0, "member1 1 up, member2 2 up") == (
        "traffic, last 5 s: member1    1  member2    2  failed 0 | total 100 answered, "
        "0 failed | HAProxy: member1 1 up, member2 2 up")


def test_summary_lines() -> None:
    one = demoview.Phase(1, "member1's DNS fails, then recovers", began=100.0, ended=121.25)
    one.mark(104.0, "member1: DNS False")
    one.answered = {"member1": 300, "member2": 934}
    two = demoview.Phase(2, "member1's API server fails, then recovers", began=130.0)
    two.answered = {"member1": 1, "member2": 2}
    two.failed = ["client 0: HTTP 503 'x'"]
    assert demoview.summary_lines([one, two], 1237, two.failed, (4, 2), "/tmp/x/logs") == [
        "summary",
        "  phase 1 (member1's DNS fails, then recovers): 21.2 s, 1234 answered "
        "(member1 300, member2 934), 0 failed",
        "         4.0 s  member1: DNS False",
        "  phase 2 (member1's API server fails, then recovers): interrupted, 3 answered "
        "(member1 1, member2 2), 1 failed",
        "      failed: client 0: HTTP 503 'x'",
        "  all traffic: 1237 answered, 1 failed; HAProxy retried 4 connections, "
        "redispatched 2",
        "  logs: /tmp/x/logs (one file per process)",
    ]


def test_flag_lines() -> None:
    assert demoview.flag_lines(["--a", "1", "--b", "--c", "x", "y"]) == [
        "--a 1", "--b", "--c x y"]


# --- the Pods' servers: when to serve an IP, when to stop -------------------------------


def _pod(name: str, ip: str | None, ready: bool = True, deleting: bool = False
         ) -> dict[str, object]:
    meta: dict[str, object] = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status: dict[str, object] = {"conditions": [{"type": "Ready",
                                                 "status": "True" if ready else "False"}]}
    if ip:
        status["podIP"] = ip
    return {"metadata": meta, "status": status}


def test_ready_pods() -> None:
    assert podservers.ready_pods([
        _pod("a", "198.19.1.2"), _pod("b", None), _pod("c", "198.19.1.3", ready=False),
        _pod("d", "198.19.1.4", deleting=True), {"metadata": {"name": "e"}},
    ]) == {"198.19.1.2": "a"}


S = podservers.Serving


@pytest.mark.parametrize(("state", "ready", "now", "expected", "opened", "closed"), [
    # a new Ready Pod is served
    ({}, {"ip1": "a"}, 10.0, {"ip1": S("a")}, ["ip1"], []),
    # the API server does not answer: nothing changes, gone or not
    ({"ip1": S("a"), "ip2": S("b", 1.0)}, None, 100.0,
     {"ip1": S("a"), "ip2": S("b", 1.0)}, [], []),
    # a Pod gone: its server stays for the grace period, counted from when it went
    ({"ip1": S("a")}, {}, 10.0, {"ip1": S("a", 10.0)}, [], []),
    ({"ip1": S("a", 10.0)}, {}, 14.9, {"ip1": S("a", 10.0)}, [], []),
    ({"ip1": S("a", 10.0)}, {}, 15.0, {}, [], ["ip1"]),
    # the IP given to a new Pod meanwhile: the server stays and serves the new Pod
    ({"ip1": S("a", 10.0)}, {"ip1": "b"}, 12.0, {"ip1": S("b")}, [], []),
    # the same Pod Ready again
    ({"ip1": S("a", 10.0)}, {"ip1": "a"}, 12.0, {"ip1": S("a")}, [], []),
])
def test_plan(state: dict[str, podservers.Serving], ready: dict[str, str] | None, now: float,
              expected: dict[str, podservers.Serving], opened: list[str],
              closed: list[str]) -> None:
    assert podservers.plan(state, ready, now, grace=5.0) == (expected, opened, closed)


# --- the demo's flags -----------------------------------------------------------------


def test_the_demo_names_the_real_defaults_of_the_timers_it_shortens() -> None:
    args = cp_settings.parser().parse([], {})
    for flag, value, default in demo.CONTROLLER_MANAGER_TIMERS:
        real = getattr(args, flag.removeprefix("--").replace("-", "_"))
        assert settings.duration(default) == real, flag
        assert settings.duration(value) < real, flag
    parsed = cp_settings.parser().parse(demo.controller_manager_flags(), {})
    for flag, value, _ in demo.CONTROLLER_MANAGER_TIMERS:
        assert getattr(parsed, flag.removeprefix("--").replace("-", "_")) == \
            settings.duration(value)


def test_real_nodes_refuses_follow_with_one_message_and_exit_code_2(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        demo.main(["--real-nodes", "--follow"])
    assert exited.value.code == 2
    assert "--follow is not available with --real-nodes" in capsys.readouterr().err
