"""The controllers' alert rules (remedy, MCI provider, control plane), checked by promtool.

The same checks as the agent's (``test_alert_rules.py``): the shipped file is
the tested file, promtool checks and unit-tests it, every alert has a firing and
a non-firing case and a runbook section in docs/alerts.md; and each chart renders
the rules as a PrometheusRule whose ``runbook_url`` follows
``prometheusRule.runbookBaseURL``.
"""

from __future__ import annotations

import pathlib
import subprocess
from typing import Any

import chartkit
import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHARTS = ("remedy", "mci-provider", "controlplane")
RUNBOOKS = ROOT / "docs" / "alerts.md"


def _rules(chart: str) -> list[dict[str, Any]]:
    groups = yaml.safe_load((ROOT / "charts" / chart / "files" / "alerts.yaml").read_text())
    return [rule for group in groups["groups"] for rule in group["rules"]]


def _promtool(promtool: str, *args: str) -> str:
    proc = subprocess.run([promtool, *args], capture_output=True, text=True, check=False,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


@pytest.mark.parametrize("chart", CHARTS)
def test_promtool_checks_and_unit_tests(promtool: str, chart: str) -> None:
    rules = f"charts/{chart}/files/alerts.yaml"
    assert f"SUCCESS: {len(_rules(chart))} rules found" in _promtool(
        promtool, "check", "rules", rules)
    tests = ROOT / "charts" / chart / "tests" / "alerts_test.yaml"
    assert [(tests.parent / f).resolve() for f in yaml.safe_load(tests.read_text())[
        "rule_files"]] == [(ROOT / rules).resolve()]
    assert "SUCCESS" in _promtool(promtool, "test", "rules", str(tests.relative_to(ROOT)))


@pytest.mark.parametrize("chart", CHARTS)
def test_every_alert_fires_and_stays_silent_somewhere(chart: str) -> None:
    firing: set[str] = set()
    silent: set[str] = set()
    tests = yaml.safe_load((ROOT / "charts" / chart / "tests" / "alerts_test.yaml").read_text())
    for case in tests["tests"]:
        for check in case.get("alert_rule_test", []):
            (firing if check.get("exp_alerts") else silent).add(check["alertname"])
    names = {rule["alert"] for rule in _rules(chart)}
    assert names - firing == set(), "alerts without a firing case"
    assert names - silent == set(), "alerts without a non-firing case"
    assert (firing | silent) - names == set()


@pytest.mark.parametrize("chart", CHARTS)
def test_every_alert_has_a_runbook_section(chart: str) -> None:
    headings = {line[3:].strip() for line in RUNBOOKS.read_text().splitlines()
                if line.startswith("## ")}
    for rule in _rules(chart):
        annotations = rule["annotations"]
        assert set(annotations) == {"summary", "description", "runbook_url"}
        assert rule["labels"]["severity"] in ("critical", "warning")
        assert annotations["runbook_url"] == f"docs/alerts.md#{rule['alert'].lower()}"
        assert rule["alert"] in headings, f"no '## {rule['alert']}' in docs/alerts.md"


@pytest.mark.parametrize("chart", [*CHARTS, "agent"])
def test_the_chart_renders_the_rules_with_runbook_urls(chart: str,
                                                       tmp_path: pathlib.Path) -> None:
    path = ROOT / "charts" / chart
    render = chartkit.renderer(chartkit.helm_for(path), path, "r", "monitoring", tmp_path)
    base = ("clusterName=member1",) if chart == "agent" else ()
    sets = ("prometheusRule.enabled=true", *base)
    (rule,) = [d for d in render(None, *sets) if d["kind"] == "PrometheusRule"]
    shipped = yaml.safe_load((path / "files" / "alerts.yaml").read_text())["groups"]
    assert rule["spec"]["groups"] == shipped
    (moved,) = [d for d in render(None, *sets,
                                  "prometheusRule.runbookBaseURL=https://ops.example/ch/")
                if d["kind"] == "PrometheusRule"]
    urls = [r["annotations"]["runbook_url"] for g in moved["spec"]["groups"]
            for r in g["rules"]]
    assert urls and all(u.startswith("https://ops.example/ch/") and u.count("#") == 1
                        and "/docs/" not in u for u in urls), urls
    assert not [d for d in render(None, *base) if d["kind"] == "PrometheusRule"]
