"""The shipped dashboards are well-formed Grafana dashboards that query what they claim.

Structure only (JSON, ids, targets, variables, layout, the controller names the
panels filter on); the PromQL is checked by promtool (test_promql.py) and the
metric names against running components (test_dashboard_metrics_live.py).
"""

from __future__ import annotations

import itertools
import json
import pathlib
import re
from typing import Any

import dashkit
import pytest

from clusterhealth_controlplane import controllers
from clusterhealth_controlplane.scheduler import controller as scheduler
from clusterhealth_mci import controller as mci
from clusterhealth_remedy import controller as remedy

PANEL_TYPES = {"timeseries", "stat", "table", "state-timeline"}
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
NAMES = [str(p.relative_to(dashkit.ROOT)) for p in dashkit.DASHBOARDS]


def _dashboard(name: str) -> dict[str, Any]:
    return dashkit.load(dashkit.ROOT / name)


def _data_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in dashkit.panels(dashboard) if p["type"] != "row"]


def test_every_component_chart_ships_a_dashboard() -> None:
    charts = sorted({p.parent.parent.name for p in dashkit.DASHBOARDS})
    assert charts == sorted(dashkit.DASHBOARD_CHARTS)


ASKED_FOR = {
    # issue 11: what people look at, per dashboard
    "agent": ["Probe success ratio", "Probe latency (p90)", "Cluster conditions over time",
              "Node conditions over time"],
    "remedy": ["Actions per cluster over time", "Which Remedy acts where"],
    "mci-provider": ["Blocked clusters per MCI", "Backends receiving traffic",
                     "Fail-open per MCI"],
    "controlplane": ["Ready clusters", "Ready per cluster", "Taints per cluster", "Evictions",
                     "Scheduling latency"],
}


@pytest.mark.parametrize("chart", sorted(ASKED_FOR))
def test_the_panels_asked_for_are_there(chart: str) -> None:
    (path,) = [p for p in dashkit.DASHBOARDS if p.parent.parent.name == chart]
    titles = {p["title"] for p in _data_panels(dashkit.load(path))}
    assert set(ASKED_FOR[chart]) <= titles


def test_uids_and_titles_are_unique() -> None:
    dashboards = [_dashboard(name) for name in NAMES]
    uids = [d["uid"] for d in dashboards]
    titles = [d["title"] for d in dashboards]
    assert len(set(uids)) == len(uids), uids
    assert len(set(titles)) == len(titles), titles


@pytest.mark.parametrize("name", NAMES)
def test_dashboard_is_valid_json_with_identity(name: str) -> None:
    text = (dashkit.ROOT / name).read_text()
    dashboard = json.loads(text)
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", dashboard["uid"]), dashboard["uid"]
    assert dashboard["uid"] == pathlib.Path(name).stem
    assert dashboard["title"].startswith("clusterhealth / ")
    assert dashboard["description"]
    assert dashboard["id"] is None  # Grafana assigns its own
    assert 36 <= dashboard["schemaVersion"] <= 41
    assert "clusterhealth" in dashboard["tags"]
    # links between the dashboards go by the tag
    assert {"type": "dashboards", "tags": ["clusterhealth"]}.items() <= \
        dashboard["links"][0].items()


@pytest.mark.parametrize("name", NAMES)
def test_panels_have_unique_ids_and_queries(name: str) -> None:
    dashboard = _dashboard(name)
    every = list(dashkit.panels(dashboard))
    ids = [p["id"] for p in every]
    assert all(isinstance(i, int) for i in ids)
    assert len(set(ids)) == len(ids), ids
    data = _data_panels(dashboard)
    assert data
    for panel in data:
        where = f"panel {panel['id']} {panel.get('title')!r}"
        assert panel["type"] in PANEL_TYPES, where
        assert panel["title"] and panel["description"], where
        assert panel["datasource"] == DATASOURCE, where
        targets = panel["targets"]
        assert targets, f"{where} has no targets"
        refs = [t["refId"] for t in targets]
        assert len(set(refs)) == len(refs), where
        for target in targets:
            assert target["datasource"] == DATASOURCE, where
            assert target["expr"].strip(), f"{where} {target['refId']} has no expression"


@pytest.mark.parametrize("name", NAMES)
def test_panels_do_not_overlap_and_fit_the_grid(name: str) -> None:
    boxes = []
    for panel in dashkit.panels(_dashboard(name)):
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["w"] > 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        boxes.append((panel["title"], pos))
    for (a, p), (b, q) in itertools.combinations(boxes, 2):
        apart = (p["x"] + p["w"] <= q["x"] or q["x"] + q["w"] <= p["x"]
                 or p["y"] + p["h"] <= q["y"] or q["y"] + q["h"] <= p["y"])
        assert apart, f"{a!r} overlaps {b!r}"


@pytest.mark.parametrize("name", NAMES)
def test_variables_come_from_the_chosen_prometheus(name: str) -> None:
    variables = dashkit.template_variables(_dashboard(name))
    datasource = variables[0]
    assert (datasource["name"], datasource["type"], datasource["query"]) == (
        "datasource", "datasource", "prometheus")
    for variable in variables[1:]:
        assert variable["type"] == "query", variable["name"]
        assert variable["datasource"] == DATASOURCE, variable["name"]
        # "All" must be a regex every panel's =~ matcher accepts, even with no values yet
        assert variable["includeAll"] and variable["allValue"] == dashkit.ALL, variable["name"]
    used = {m for e in dashkit.dashboard_expressions(dashkit.ROOT / name)
            for m in re.findall(r"\$(\w+)", e.text)}
    defined = {v["name"] for v in variables}
    assert used - set(dashkit.GRAFANA_VALUES) <= defined
    assert defined - {"datasource"} <= used, "a variable no panel uses"


def _controller_names(name: str) -> set[str]:
    """The controller (and queue) names the dashboard's panels filter on."""
    found: set[str] = set()
    for expression in dashkit.dashboard_expressions(dashkit.ROOT / name):
        for value in re.findall(r'\b(?:controller|name)=~?"([^"]*)"', expression.text):
            found.update(value.split("|"))
    return found


@pytest.mark.parametrize(("chart", "expected"), [
    ("remedy", {remedy.CLUSTER_CONTROLLER, remedy.REMEDY_CONTROLLER}),
    ("mci-provider", {mci.CONTROLLER}),
    ("controlplane", {*controllers.NAMES, scheduler.CONTROLLER}),
])
def test_controller_filters_name_the_components_controllers(chart: str,
                                                             expected: set[str]) -> None:
    # a renamed controller must fail here, not leave a panel empty
    (path,) = [p for p in dashkit.DASHBOARDS if p.parent.parent.name == chart]
    assert _controller_names(str(path.relative_to(dashkit.ROOT))) == expected


def _quantity(expr: str) -> str:
    """What a query plots: seconds, a fraction, events per interval or a level (count)."""
    if re.search(r"_seconds(_bucket|_sum)?\b", expr) and "timestamp" not in expr:
        return "seconds"
    if re.search(r"_(fraction|ratio)\b", expr):
        return "fraction"
    if re.search(r"\b(increase|rate|irate)\(", expr):
        return "events"
    return "level"


UNITS = {"seconds": {"s"}, "fraction": {"percentunit"}}


@pytest.mark.parametrize("name", NAMES)
def test_no_panel_mixes_units(name: str) -> None:
    """One axis per panel: a level beside a latency (or a fraction) is unreadable."""
    for panel in _data_panels(_dashboard(name)):
        if panel["type"] not in ("timeseries", "state-timeline"):
            continue
        kinds = {_quantity(t["expr"]) for t in panel["targets"]}
        where = f"panel {panel['id']} {panel['title']!r}"
        assert len(kinds) == 1, f"{where} mixes {sorted(kinds)}: split it"
        (kind,) = kinds
        unit = ((panel.get("fieldConfig") or {}).get("defaults") or {}).get("unit")
        if kind in UNITS and not any(o.get("properties") for o in
                                     panel["fieldConfig"].get("overrides") or []):
            assert unit in UNITS[kind], f"{where} plots {kind} with unit {unit!r}"
