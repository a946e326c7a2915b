"""The panels whose queries join or encode series compute what their titles say.

``promtool check rules`` only parses; these cases evaluate the shipped
expressions (Grafana's variables at "All") over series shaped as Prometheus
scrapes them (``instance``/``job`` target labels, a stale former leader, a
probe that never succeeded) with ``promtool test rules``, and compare the
results exactly.
"""

from __future__ import annotations

import dataclasses
import pathlib
import subprocess
from typing import Any

import dashkit
import yaml

AGENT_A = 'instance="10.0.0.1:10358", job="agent"'
AGENT_B = 'instance="10.0.0.2:10358", job="agent"'
LEADER = 'instance="10.0.1.1:10357", job="controlplane"'
FORMER = 'instance="10.0.1.2:10357", job="controlplane"'
REMEDY = 'instance="10.0.2.1:10359", job="remedy"'
MCI = 'instance="10.0.3.1:10360", job="mci"'
SCHEDULER = 'instance="10.0.1.3:10351", job="scheduler"'


@dataclasses.dataclass(frozen=True)
class Case:
    chart: str
    panel: str
    series: list[tuple[str, str]]
    """(series, promtool values: 15 s apart)."""
    expected: list[tuple[str, float]]
    """(labels, value) at 10 minutes."""


CASES = [
    # 3 of 4 runs succeed on node-a; node-b's probe never succeeded (no success series): 0
    Case("agent", "Probe success ratio", [
        (f'clusterhealth_agent_probe_results_total{{{AGENT_A}, probe="dns", outcome="success", '
         'reason="Resolved"}', "0+3x60"),
        (f'clusterhealth_agent_probe_results_total{{{AGENT_A}, probe="dns", outcome="failure", '
         'reason="Timeout"}', "0+1x60"),
        (f'clusterhealth_agent_probe_results_total{{{AGENT_B}, probe="dns", outcome="failure", '
         'reason="NXDOMAIN"}', "0+1x60"),
        (f'clusterhealth_agent_info{{{AGENT_A}, cluster="member1", node="node-a"}}', "1x60"),
        (f'clusterhealth_agent_info{{{AGENT_B}, cluster="member1", node="node-b"}}', "1x60"),
    ], [
        (f'{{{AGENT_A}, cluster="member1", node="node-a", probe="dns"}}', 0.75),
        (f'{{{AGENT_B}, cluster="member1", node="node-b", probe="dns"}}', 0),
    ]),
    # the leader's conditions, encoded False 0 / Unknown 1 / True 2; a non-leader's ignored
    Case("agent", "Cluster conditions over time", [
        *[(f'clusterhealth_agent_cluster_condition{{{AGENT_A}, cluster="member1", '
           f'condition="{ctype}", status="{status}"}}', f"{value}x60")
          for ctype, found in (("DNS", "False"), ("Other", "True"))
          for status, value in (("True", int(found == "True")),
                                ("False", int(found == "False")), ("Unknown", 0))],
        (f'clusterhealth_agent_cluster_condition{{{AGENT_B}, cluster="member1", '
         'condition="DNS", status="True"}', "1x60"),
        (f'clusterhealth_agent_cluster_condition{{{AGENT_B}, cluster="member1", '
         'condition="DNS", status="Unknown"}', "0x60"),
        (f'clusterhealth_agent_is_leader{{{AGENT_A}, cluster="member1"}}', "1x60"),
        (f'clusterhealth_agent_is_leader{{{AGENT_B}, cluster="member1"}}', "0x60"),
    ], [
        ('{cluster="member1", condition="DNS"}', 0),
        ('{cluster="member1", condition="Other"}', 2),
    ]),
    # a node's condition gets its cluster from the same pod's info series
    Case("agent", "Node conditions over time", [
        *[(f'clusterhealth_agent_node_condition{{{AGENT_A}, node="node-a", condition="DNS", '
           f'status="{status}"}}', f"{int(status == 'Unknown')}x60")
          for status in ("True", "False", "Unknown")],
        (f'clusterhealth_agent_info{{{AGENT_A}, cluster="member1", node="node-a"}}', "1x60"),
    ], [
        ('{cluster="member1", node="node-a", condition="DNS"}', 1),
    ]),
    Case("agent", "Clusters without a leading agent", [
        (f'clusterhealth_agent_is_leader{{{AGENT_A}, cluster="member1"}}', "0x60"),
        (f'clusterhealth_agent_is_leader{{{AGENT_B}, cluster="member1"}}', "0x60"),
        ('clusterhealth_agent_is_leader{instance="10.0.0.3:10358", job="agent", '
         'cluster="member2"}', "1x60"),
    ], [("{}", 1)]),
    # Ready from the replica that leads; a former leader's stale series do not count
    Case("controlplane", "Ready per cluster", [
        *[(f'clusterhealth_cluster_ready{{{LEADER}, cluster="{cluster}", status="{status}"}}',
           f"{int(status == found)}x60")
          for cluster, found in (("member1", "True"), ("member2", "Unknown"))
          for status in ("True", "False", "Unknown")],
        (f'clusterhealth_cluster_ready{{{FORMER}, cluster="member2", status="True"}}', "1x60"),
        (f'clusterhealth_cluster_ready{{{FORMER}, cluster="member2", status="Unknown"}}',
         "0x60"),
        (f"clusterhealth_controlplane_is_leader{{{LEADER}}}", "1x60"),
        (f"clusterhealth_controlplane_is_leader{{{FORMER}}}", "0x60"),
    ], [('{cluster="member1"}', 2), ('{cluster="member2"}', 1)]),
    Case("controlplane", "Tainted clusters", [
        (f'clusterhealth_cluster_taints{{{LEADER}, cluster="member2", '
         'key="cluster.karmada.io/not-ready", effect="NoSchedule"}', "1x60"),
        (f'clusterhealth_cluster_taints{{{LEADER}, cluster="member2", '
         'key="cluster.karmada.io/not-ready", effect="NoExecute"}', "1x60"),
        (f'clusterhealth_cluster_taints{{{FORMER}, cluster="member1", '
         'key="cluster.karmada.io/not-ready", effect="NoSchedule"}', "1x60"),
        (f"clusterhealth_controlplane_is_leader{{{LEADER}}}", "1x60"),
        (f"clusterhealth_controlplane_is_leader{{{FORMER}}}", "0x60"),
    ], [("{}", 1)]),
    Case("controlplane", "Ready clusters", [
        (f'clusterhealth_cluster_ready{{{LEADER}, cluster="member1", status="True"}}', "0x60"),
        (f"clusterhealth_controlplane_is_leader{{{LEADER}}}", "1x60"),
    ], [("{}", 0)]),  # none Ready: 0, not "no data"
    # p99 per component over its replicas, joined to build_info; an agent's lags left out
    Case("controlplane", "Event loop held (p99 lag)", [
        *[(f'clusterhealth_event_loop_lag_seconds_bucket{{{target}, le="{le}"}}',
           f"0+{per}x60")
          for target, counts in ((LEADER, (0, 150, 150, 150)), (FORMER, (150, 150, 150, 150)),
                                 (SCHEDULER, (0, 0, 150, 150)), (AGENT_A, (0, 0, 0, 150)))
          for le, per in zip(("0.05", "0.1", "0.25", "+Inf"), counts, strict=True)],
        *[(f'clusterhealth_build_info{{{target}, component="{component}", version="0.1.0", '
           'python_version="3.11.2"}', "1x60")
          for target, component in ((LEADER, "controlplane"), (FORMER, "controlplane"),
                                    (SCHEDULER, "scheduler"), (AGENT_A, "agent"))],
    ], [
        # (0.05, 0.1]: rank 297 of 300, 147 of its 150 -> 0.05 + 0.98 * 0.05
        ('{component="controlplane"}', 0.099),
        # (0.1, 0.25]: rank 148.5 of 150 -> 0.1 + 0.99 * 0.15
        ('{component="scheduler"}', 0.2485),
    ]),
    Case("remedy", "Clusters acted on, per Remedy", [
        (f'clusterhealth_remedy_action_sources{{{REMEDY}, cluster="{cluster}", '
         f'action="{action}", remedy="{remedy}"}}', "1x60")
        for cluster, action, remedy in (("m1", "TrafficControl", "dns"),
                                        ("m2", "TrafficControl", "dns"),
                                        ("m2", "Other", "dns"),
                                        ("m2", "TrafficControl", "manual"))
    ], [('{remedy="dns"}', 2), ('{remedy="manual"}', 1)]),
    Case("mci-provider", "MCIs with blocked clusters", [
        (f'clusterhealth_mci_blocked_clusters{{{MCI}, mci="shop/web"}}', "1x60"),
        (f'clusterhealth_mci_blocked_clusters{{{MCI}, mci="shop/api"}}', "0x60"),
    ], [("{}", 1)]),
    Case("mci-provider", "MCIs failing open", [
        (f'clusterhealth_mci_fail_open{{{MCI}, mci="shop/web"}}', "0x60"),
    ], [("{}", 0)]),
]


def _test_file(cases: list[Case], tmp_path: pathlib.Path) -> pathlib.Path:
    empty = tmp_path / "none.rules.yaml"
    empty.write_text("groups: []\n")
    tests: list[dict[str, Any]] = [{
        "name": f"{case.chart}: {case.panel}",
        "interval": "15s",
        "input_series": [{"series": s, "values": v} for s, v in case.series],
        "promql_expr_test": [{
            "expr": dashkit.panel_expression(case.chart, case.panel).promql,
            "eval_time": "10m",
            "exp_samples": [{"labels": labels, "value": value}
                            for labels, value in case.expected]}],
    } for case in cases]
    path = tmp_path / "dashboards_test.yaml"
    path.write_text(yaml.safe_dump({"rule_files": [empty.name], "evaluation_interval": "15s",
                                    "tests": tests}, sort_keys=False))
    return path


def test_panel_queries_compute_what_they_show(promtool: str, tmp_path: pathlib.Path) -> None:
    path = _test_file(CASES, tmp_path)
    proc = subprocess.run([promtool, "test", "rules", path.name], capture_output=True,
                          text=True, check=False, cwd=tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "SUCCESS" in output, output


def test_the_unit_test_can_fail(promtool: str, tmp_path: pathlib.Path) -> None:
    """A wrong expectation is reported (the check above is not vacuous)."""
    wrong = dataclasses.replace(CASES[0], expected=[(CASES[0].expected[0][0], 0.5)])
    path = _test_file([wrong], tmp_path)
    proc = subprocess.run([promtool, "test", "rules", path.name], capture_output=True,
                          text=True, check=False, cwd=tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "FAILED" in output and "clusterhealth_agent_probe_results_total" in output, output
