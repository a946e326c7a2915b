"""Every PromQL expression of the dashboards and alert rules passes ``promtool check rules``,
and the metric-name comparison the live test relies on catches renamed metrics (tables)."""

from __future__ import annotations

import pathlib
import subprocess

import dashkit
import prometheus_client
import pytest
import yaml

from clusterhealth_remedy import metrics as remedy_metrics


def _check_rules(promtool: str, rules: dict[str, object], tmp_path: pathlib.Path
                 ) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "expressions.rules.yaml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    return subprocess.run([promtool, "check", "rules", str(path)], capture_output=True,
                          text=True, check=False)


def test_there_are_expressions_from_every_file() -> None:
    wheres = {e.where.split(" ")[0] for e in dashkit.all_expressions()}
    assert wheres == {str(p.relative_to(dashkit.ROOT))
                      for p in [*dashkit.DASHBOARDS, dashkit.ALERTS]}


def test_promtool_accepts_every_expression(promtool: str, tmp_path: pathlib.Path) -> None:
    expressions = dashkit.all_expressions()
    proc = _check_rules(promtool, dashkit.rule_file(expressions), tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert f"SUCCESS: {len(expressions)} rules found" in output, output


def test_promtool_check_can_fail(promtool: str, tmp_path: pathlib.Path) -> None:
    """The check above is not vacuous: a broken join is refused, naming the rule."""
    broken = dashkit.Expression("broken", 'sum by (cluster) (rate(x[$__rate_interval])) '
                                          '* group_left (node) y')
    proc = _check_rules(promtool, dashkit.rule_file([broken]), tmp_path)
    assert proc.returncode != 0
    assert "clusterhealth_check:expression_0" in proc.stdout + proc.stderr


def test_every_expression_selects_a_metric() -> None:
    for expression in dashkit.all_expressions():
        names = dashkit.metric_names(expression.promql)
        assert names, f"{expression.where}: no metric in {expression.text!r}"
        assert all(n.startswith("clusterhealth_") for n in names), (expression.where, names)


# --- the helpers, as tables ------------------------------------------------------------

@pytest.mark.parametrize(("expr", "names"), [
    ("up", {"up"}),
    ('sum by (cluster) (rate(a_total{cluster=~"x|y", node!="n"}[5m]))', {"a_total"}),
    ("max by (cluster, condition) ((b == 1) and ignoring (condition, status) (c == 1))",
     {"b", "c"}),
    ("d * ignoring (probe, cluster, node) group_left (cluster, node) e", {"d", "e"}),
    ("f * on (instance) group_left g", {"f", "g"}),
    ("histogram_quantile(0.9, sum by (le) (rate(h_bucket[1m])))", {"h_bucket"}),
    ("count(i > 0) or vector(0)", {"i"}),
    ("time() - (j > 0)", {"j"}),
    ("sum without (outcome, reason) (k) / sum(l offset 5m)", {"k", "l"}),
    ('topk(3, m) unless n{label="by (sum)"}', {"m", "n"}),
    ("avg_over_time(o[5m:1m]) > bool 2", {"o"}),
    ("absent(p) # a comment naming q", {"p"}),
    ("sum(Inf * r) + NaN", {"r"}),
    ("ns:recorded:rate5m", {"ns:recorded:rate5m"}),
    ("vector(1)", set()),
])
def test_metric_names(expr: str, names: set[str]) -> None:
    assert dashkit.metric_names(expr) == names


def test_a_name_selector_is_refused_not_guessed() -> None:
    with pytest.raises(ValueError, match="__name__"):
        dashkit.metric_names('{__name__=~"clusterhealth_.*"}')


@pytest.mark.parametrize(("text", "variables", "expected"), [
    ('rate(a{c=~"$cluster"}[$__rate_interval])', {"cluster"}, 'rate(a{c=~".*"}[1m])'),
    ('increase(a{c=~"${cluster}"}[$__range])', {"cluster"}, 'increase(a{c=~".*"}[1h])'),
    ('a{c=~"${cluster:regex}", n=~"[[node]]"}', {"cluster", "node"}, 'a{c=~".*", n=~".*"}'),
    ('a{c=~"^x$"}', set(), 'a{c=~"^x$"}'),
])
def test_substitute(text: str, variables: set[str], expected: str) -> None:
    assert dashkit.substitute(text, variables) == expected


def test_substitute_refuses_an_unknown_variable() -> None:
    with pytest.raises(KeyError, match="cluster"):
        dashkit.substitute('a{c=~"$cluster"}')


@pytest.mark.parametrize(("query", "expr"), [
    ("label_values(a, cluster)", "a"),
    ('label_values(a{x=~"$y"}, node)', 'a{x=~"$y"}'),
    ("query_result(sum by (m) (b))", "sum by (m) (b)"),
])
def test_variable_queries(query: str, expr: str) -> None:
    assert dashkit.variable_expression(query) == expr


def test_a_variable_query_without_an_expression_is_refused() -> None:
    with pytest.raises(ValueError, match="label_values"):
        dashkit.variable_expression("label_values(cluster)")


def _remedy_exposition() -> str:
    """What a Remedy controller's registry serves before anything happened."""
    registry = prometheus_client.CollectorRegistry()
    remedy_metrics.RemedyMetrics(registry)
    return prometheus_client.generate_latest(registry).decode()


def test_exported_names_include_labelled_families_without_samples() -> None:
    names = dashkit.exported_names(_remedy_exposition())
    # gauges with labels and no sample yet: declared by their TYPE line
    assert {"clusterhealth_remedy_active_actions", "clusterhealth_remedy_action_sources"} <= names
    assert "clusterhealth_remedy_evaluations_total" in names  # a counter with its sample
    # _created series are off once a component has started in this process (prometheus_client's
    # switch is process-wide): whichever the exposition has, the names have
    exposition = _remedy_exposition()
    assert ("clusterhealth_remedy_evaluations_created" in dashkit.exported_names(exposition)) == (
        "clusterhealth_remedy_evaluations_created" in exposition)


def test_exported_names_of_a_histogram_are_its_series() -> None:
    registry = prometheus_client.CollectorRegistry()
    prometheus_client.Histogram("h_seconds", "h", ["x"], registry=registry)
    names = dashkit.exported_names(prometheus_client.generate_latest(registry).decode())
    assert names == {"h_seconds_bucket", "h_seconds_sum", "h_seconds_count"}


@pytest.mark.parametrize(("expr", "not_exported"), [
    # what the dashboards use: nothing missing
    ('sum(rate(clusterhealth_remedy_evaluations_total[5m]))', set()),
    ('max by (cluster, action, remedy) (clusterhealth_remedy_action_sources)', set()),
    # a renamed metric (the case this test exists for)
    ('sum(rate(clusterhealth_remedy_evaluation_total[5m]))',
     {"clusterhealth_remedy_evaluation_total"}),
    ('clusterhealth_remedy_active_action{cluster="m1"}', {"clusterhealth_remedy_active_action"}),
    # a counter without _total, a gauge read as a histogram
    ('rate(clusterhealth_remedy_evaluations[5m])', {"clusterhealth_remedy_evaluations"}),
    ('histogram_quantile(0.9, rate(clusterhealth_remedy_active_actions_bucket[5m]))',
     {"clusterhealth_remedy_active_actions_bucket"}),
    # one wrong name among right ones
    ('clusterhealth_remedy_is_leader and clusterhealth_remedy_is_leaders',
     {"clusterhealth_remedy_is_leaders"}),
])
def test_missing_names_a_renamed_metric(expr: str, not_exported: set[str]) -> None:
    used = dashkit.used_names([dashkit.Expression("panel 1", expr)])
    found = dashkit.missing(used, dashkit.exported_names(_remedy_exposition()))
    assert set(found) == not_exported
    assert all(where == ["panel 1"] for where in found.values())
