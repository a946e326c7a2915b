"""The shipped dashboards and alert rules as data: their PromQL and the metric names it uses.

The tests of this folder check the files the charts ship
(``charts/*/dashboards/*.json``, ``charts/agent/files/alerts.yaml``): every
expression with ``promtool``, every metric name against what the running
components export.  The helpers here are pure (text in, names out) so that
the name comparison itself is tested with tables, including the renamed
metric it exists to catch.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHARTS = ROOT / "charts"
DASHBOARDS = sorted(CHARTS.glob("*/dashboards/*.json"))
ALERTS = CHARTS / "agent" / "files" / "alerts.yaml"
DASHBOARD_CHARTS = ("agent", "remedy", "mci-provider", "controlplane")
"""The charts that ship a dashboard (every chart with a component)."""

GRAFANA_VALUES = {"__rate_interval": "1m", "__interval": "1m", "__range": "1h"}
"""What Grafana's built-in variables stand for when an expression is checked."""
ALL = ".*"
"""A dashboard's own template variables stand for their "All" value (allValue)."""


@dataclasses.dataclass(frozen=True)
class Expression:
    """One PromQL expression of a shipped file, and where it is."""

    where: str
    text: str
    """As written (Grafana variables and all)."""
    variables: frozenset[str] = frozenset()
    """The template variables of its dashboard (none for an alert rule)."""

    @property
    def promql(self) -> str:
        """The expression as Prometheus gets it, Grafana's variables substituted."""
        return substitute(self.text, self.variables)


def load(path: pathlib.Path) -> dict[str, Any]:
    loaded = json.loads(path.read_text())
    assert isinstance(loaded, dict)
    return loaded


def panels(dashboard: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, the panels of collapsed rows included."""
    for panel in dashboard.get("panels") or []:
        yield panel
        yield from panel.get("panels") or []


def template_variables(dashboard: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((dashboard.get("templating") or {}).get("list") or [])


def variable_query(variable: Mapping[str, Any]) -> str:
    """A query variable's query (Grafana stores a string or an object with ``query``)."""
    query = variable.get("query")
    if isinstance(query, Mapping):
        query = query.get("query")
    assert isinstance(query, str), variable
    return query


_LABEL_VALUES = re.compile(r"^\s*label_values\s*\((?P<expr>.*),\s*(?P<label>[A-Za-z_]\w*)\s*\)\s*$",
                           re.S)
_QUERY_RESULT = re.compile(r"^\s*query_result\s*\((?P<expr>.*)\)\s*$", re.S)


def variable_expression(query: str) -> str:
    """The PromQL inside a Prometheus variable query (``label_values(expr, label)``,
    ``query_result(expr)``); any other form is refused, so nothing goes unchecked."""
    for pattern in (_LABEL_VALUES, _QUERY_RESULT):
        match = pattern.match(query)
        if match:
            return match.group("expr").strip()
    raise ValueError(f"variable query {query!r}: not label_values(<expr>, <label>) "
                     "or query_result(<expr>)")


def dashboard_expressions(path: pathlib.Path) -> list[Expression]:
    """Every target expression and every variable query of a dashboard file."""
    dashboard = load(path)
    name = str(path.relative_to(ROOT))
    variables = frozenset(str(v["name"]) for v in template_variables(dashboard))
    found = []
    for variable in template_variables(dashboard):
        if variable.get("type") == "query":
            found.append(Expression(f"{name} variable {variable['name']}",
                                    variable_expression(variable_query(variable)), variables))
    for panel in panels(dashboard):
        for target in panel.get("targets") or []:
            found.append(Expression(
                f"{name} panel {panel['id']} {panel.get('title')!r} {target.get('refId')}",
                str(target.get("expr", "")), variables))
    return found


def alert_expressions(path: pathlib.Path = ALERTS) -> list[Expression]:
    rules = yaml.safe_load(path.read_text())
    name = str(path.relative_to(ROOT))
    return [Expression(f"{name} {rule.get('alert') or rule.get('record')}", str(rule["expr"]))
            for group in rules["groups"] for rule in group["rules"]]


def all_expressions() -> list[Expression]:
    found = [e for path in DASHBOARDS for e in dashboard_expressions(path)]
    return found + alert_expressions()


_VARIABLE = re.compile(r"\$\{(?P<braced>\w+)(?::\w+)?\}|\$(?P<plain>\w+)|\[\[(?P<old>\w+)\]\]")


def substitute(text: str, variables: Iterable[str] = ()) -> str:
    """``text`` with Grafana's variables replaced; an unknown variable is an error."""
    own = set(variables)

    def value(match: re.Match[str]) -> str:
        name = match.group("braced") or match.group("plain") or match.group("old")
        if name in GRAFANA_VALUES:
            return GRAFANA_VALUES[name]
        if name in own:
            return ALL
        raise KeyError(f"unknown variable ${name} in {text!r}")

    return _VARIABLE.sub(value, text)


# --- metric names in PromQL ------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
  | (?P<number>0[xX][0-9a-fA-F]+
       |(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?:(?:ms|[smhdwy])(?:\d+(?:ms|[smhdwy]))*)?)
  | (?P<name>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<op>==|!=|=~|!~|<=|>=|[-+*/%^<>=(){}\[\],@:])
""", re.X)
KEYWORDS = frozenset({"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
                      "group_right", "bool", "offset", "inf", "nan", "atan2"})
LABEL_LISTS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
"""Keywords followed by a parenthesised list of label names (optional for group_*)."""
AGGREGATIONS = frozenset({"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
                          "count_values", "bottomk", "topk", "quantile", "limitk",
                          "limit_ratio"})


def _tokens(expr: str) -> list[tuple[str, str]]:
    found = []
    position = 0
    while position < len(expr):
        match = _TOKEN.match(expr, position)
        if match is None:
            raise ValueError(f"cannot read {expr[position:position + 20]!r} in {expr!r}")
        kind = str(match.lastgroup)
        if kind not in ("space", "comment"):
            found.append((kind, match.group()))
        position = match.end()
    return found


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (functions, keywords, label names and
    aggregations are not); ``{__name__=...}`` selectors are refused, not guessed."""
    tokens = _tokens(expr)
    names: set[str] = set()
    braces = brackets = 0
    index = 0
    while index < len(tokens):
        kind, text = tokens[index]
        following = tokens[index + 1][1] if index + 1 < len(tokens) else ""
        index += 1
        if text in "{}[]" and kind == "op":
            braces += {"{": 1, "}": -1}.get(text, 0)
            brackets += {"[": 1, "]": -1}.get(text, 0)
            continue
        if kind != "name":
            continue
        if braces:
            if text == "__name__":
                raise ValueError(f"{{__name__...}} selector in {expr!r}: name the metric")
            continue  # a label name
        if brackets:
            continue
        lower = text.lower()
        if lower in LABEL_LISTS:
            if following == "(":
                depth = 0
                while index < len(tokens):
                    depth += {"(": 1, ")": -1}.get(tokens[index][1], 0)
                    index += 1
                    if depth == 0:
                        break
            continue
        if lower in KEYWORDS or following == "(":
            continue  # a keyword, a function or an aggregation applied directly
        if lower in AGGREGATIONS and following.lower() in ("by", "without"):
            continue  # sum by (...) (...)
        names.add(text)
    return names


def used_names(expressions: Iterable[Expression]) -> dict[str, list[str]]:
    """Metric name to where it is used."""
    used: dict[str, list[str]] = {}
    for expression in expressions:
        for name in metric_names(expression.promql):
            used.setdefault(name, []).append(expression.where)
    return used


# --- metric names a component exports --------------------------------------------------

SAMPLE_SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("", "_sum", "_count"),
                   "counter": ("",), "gauge": ("",), "untyped": ("",), "info": ("",),
                   "stateset": ("",), "gaugehistogram": ("_bucket", "_gsum", "_gcount")}
"""The series names a family of each type has (Prometheus' text format: a counter's
family name already ends in ``_total``).  A family with labels but no sample yet has
only its ``# TYPE`` line: its series names are these."""


def exported_names(exposition: str) -> set[str]:
    """The series names a ``/metrics`` text (Prometheus' format) holds or declares."""
    names: set[str] = set()
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split(maxsplit=3)
            names.update(family + suffix for suffix in SAMPLE_SUFFIXES[kind.strip()])
        elif line and not line.startswith("#"):
            match = re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line)
            assert match, line
            names.add(match.group())
    return names


def missing(used: Mapping[str, Iterable[str]], exported: Iterable[str]) -> dict[str, list[str]]:
    """The used names no component exports, with where each is used."""
    have = set(exported)
    return {name: sorted(where) for name, where in sorted(used.items()) if name not in have}


# --- promtool ------------------------------------------------------------------------------

def rule_file(expressions: Iterable[Expression]) -> dict[str, Any]:
    """A rule file with one recording rule per expression (for ``promtool check rules``)."""
    rules = [{"record": f"clusterhealth_check:expression_{index}", "expr": e.promql}
             for index, e in enumerate(expressions)]
    return {"groups": [{"name": "clusterhealth-dashboards-and-alerts", "rules": rules}]}


def panel_expression(chart: str, title: str, ref: str = "A") -> Expression:
    """The expression of one target of a chart's dashboard, by panel title and refId."""
    (path,) = [p for p in DASHBOARDS if p.parent.parent.name == chart]
    dashboard = load(path)
    variables = frozenset(str(v["name"]) for v in template_variables(dashboard))
    for panel in panels(dashboard):
        if panel.get("title") == title:
            for target in panel.get("targets") or []:
                if target.get("refId") == ref:
                    return Expression(f"{path.name} {title!r} {ref}", str(target["expr"]),
                                      variables)
    raise KeyError(f"no panel {title!r} with target {ref} in {path}")
