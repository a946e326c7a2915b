"""The agent's alert rules (charts/agent/files/alerts.yaml), checked and unit-tested by promtool.

promtool comes from Debian's ``prometheus`` package, which the bootstrap
installs; without it these tests fail, never skip (the ``promtool`` fixture of
tests/conftest.py).
"""

from __future__ import annotations

import pathlib
import re
import subprocess
from typing import Any

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "agent"
ALERTS = CHART / "files" / "alerts.yaml"
ALERT_TESTS = CHART / "tests" / "alerts_test.yaml"
RUNBOOKS = ROOT / "docs" / "agent-alerts.md"

# What the alerts promise (severity, for): docs/agent-alerts.md describes the same.
EXPECTED = {
    "ClusterDNSResolutionFailing": ("critical", "1m"),
    "ClusterHealthProbeFailing": ("warning", "5m"),
    "NodeHealthProbeFailing": ("warning", "10m"),
    "ClusterHealthAgentReportStale": ("warning", None),
    "ClusterHealthAgentNeverReported": ("warning", "5m"),
    "ClusterHealthAgentNoLeader": ("critical", "2m"),
    "ClusterHealthAgentNotScraped": ("warning", "10m"),
}


def _promtool(promtool: str, *args: str) -> str:
    proc = subprocess.run([promtool, *args], capture_output=True, text=True, check=False,
                          cwd=ROOT)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"promtool {' '.join(args)} failed:\n{output}"
    return output


def _rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def _alert_names() -> list[str]:
    return [rule["alert"] for rule in _rules() if "alert" in rule]


def test_promtool_check_rules(promtool: str) -> None:
    output = _promtool(promtool, "check", "rules", str(ALERTS.relative_to(ROOT)))
    assert f"SUCCESS: {len(_rules())} rules found" in output, output


def test_promtool_unit_tests(promtool: str) -> None:
    output = _promtool(promtool, "test", "rules", str(ALERT_TESTS.relative_to(ROOT)))
    assert "SUCCESS" in output, output


def test_unit_tests_use_the_shipped_rule_file() -> None:
    tests = yaml.safe_load(ALERT_TESTS.read_text())
    assert [(ALERT_TESTS.parent / f).resolve() for f in tests["rule_files"]] == [ALERTS]


def test_every_alert_has_a_firing_and_a_non_firing_case() -> None:
    firing: set[str] = set()
    silent: set[str] = set()
    for case in yaml.safe_load(ALERT_TESTS.read_text())["tests"]:
        for check in case.get("alert_rule_test", []):
            (firing if check.get("exp_alerts") else silent).add(check["alertname"])
    names = set(_alert_names())
    assert names - firing == set(), "alerts without a firing case"
    assert names - silent == set(), "alerts without a non-firing case"
    assert (firing | silent) - names == set(), "test cases for alerts that do not exist"


def test_the_alerts_are_the_promised_ones() -> None:
    rules = _rules()
    assert all("alert" in rule for rule in rules), "only alerting rules in this file"
    assert {r["alert"]: (r["labels"]["severity"], r.get("for")) for r in rules} == EXPECTED
    assert len(_alert_names()) == len(set(_alert_names()))


@pytest.mark.parametrize("name", list(EXPECTED))
def test_alert_annotations_name_the_cluster_and_a_runbook(name: str) -> None:
    rule = next(r for r in _rules() if r["alert"] == name)
    annotations = rule["annotations"]
    assert set(annotations) == {"summary", "description", "runbook_url"}
    cluster = re.compile(r"\{\{[^}]*\$(labels|externalLabels)\.cluster[^}]*\}\}")
    assert cluster.search(annotations["summary"]), annotations["summary"]
    assert cluster.search(annotations["description"]), annotations["description"]
    if "$labels.cluster" in annotations["summary"]:
        assert "cluster" in re.findall(r"by \(([^)]*)\)", rule["expr"])[0].replace(" ", "")

    anchor = name.lower()
    assert annotations["runbook_url"] == f"docs/agent-alerts.md#{anchor}"
    headings = [line.lstrip("#").strip() for line in RUNBOOKS.read_text().splitlines()
                if line.startswith("## ")]
    assert name in headings, f"no '## {name}' section in {RUNBOOKS.relative_to(ROOT)}"
