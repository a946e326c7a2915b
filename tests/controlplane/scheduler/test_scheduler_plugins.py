"""The scheduler's filters and scores as tables, the registry and ``--plugins`` selection."""

from __future__ import annotations

import ast
import pathlib

import pytest

from clusterhealth_controlplane.scheduler import assignment, framework, plugins, selectors, spread
from clusterhealth_controlplane.scheduler.plugins import (
    apienablement,
    clusteraffinity,
    clustereviction,
    clusterlocality,
    spreadconstraint,
    tainttoleration,
)

NOT_READY = "cluster.karmada.io/not-ready"
UNREACHABLE = "cluster.karmada.io/unreachable"
APPS = {"apps/v1": frozenset({"Deployment", "StatefulSet"}), "v1": frozenset({"ConfigMap"})}


def binding(targets: tuple[str, ...] = (), evicting: tuple[str, ...] = ()) -> framework.BindingView:
    return framework.BindingView(
        "apps/v1", "Deployment", 3,
        clusters=tuple(assignment.TargetCluster(name, 1) for name in targets),
        evicting_from=frozenset(evicting),
    )


def member(name: str = "member1", **fields: object) -> framework.ClusterView:
    return framework.ClusterView(name, **fields)  # type: ignore[arg-type]


# --- ClusterAffinity -------------------------------------------------------------------

R = framework.Requirement
LABELS = {"env": "prod", "tier": "1"}


@pytest.mark.parametrize(
    ("affinity", "cluster", "fits"),
    [
        (None, member(), True),
        (framework.ClusterAffinity(), member(), True),
        (framework.ClusterAffinity(cluster_names=("member1", "member2")), member(), True),
        (framework.ClusterAffinity(cluster_names=("member2",)), member(), False),
        (framework.ClusterAffinity(exclude=("member1",)), member(), False),
        # Exclusion wins over a name.
        (framework.ClusterAffinity(cluster_names=("member1",), exclude=("member1",)), member(),
         False),
        (framework.ClusterAffinity(label_selector=framework.LabelSelector({"env": "prod"})),
         member(labels=LABELS), True),
        (framework.ClusterAffinity(label_selector=framework.LabelSelector({"env": "dev"})),
         member(labels=LABELS), False),
        (framework.ClusterAffinity(label_selector=framework.LabelSelector(
            match_expressions=(R("tier", "In", ("1", "2")), R("gpu", "DoesNotExist")))),
         member(labels=LABELS), True),
        (framework.ClusterAffinity(label_selector=framework.LabelSelector(
            match_expressions=(R("env", "NotIn", ("prod",)),))), member(labels=LABELS), False),
        (framework.ClusterAffinity(label_selector=framework.LabelSelector(
            match_expressions=(R("env", "Exists"),))), member(), False),
        # A selector Kubernetes rejects selects nothing.
        (framework.ClusterAffinity(label_selector=framework.LabelSelector(
            match_expressions=(R("env", "In"),))), member(labels=LABELS), False),
        (framework.ClusterAffinity(field_selector=(R("region", "In", ("eu", "us")),)),
         member(region="eu"), True),
        (framework.ClusterAffinity(field_selector=(R("provider", "NotIn", ("aws",)),)),
         member(provider="aws"), False),
        # NotIn on a missing field matches (node-selector semantics).
        (framework.ClusterAffinity(field_selector=(R("provider", "NotIn", ("aws",)),)),
         member(), True),
        (framework.ClusterAffinity(field_selector=(R("zone", "In", ("z2",)),)),
         member(zones=("z1", "z2")), True),
        (framework.ClusterAffinity(field_selector=(R("zone", "NotIn", ("z2",)),)),
         member(zones=("z1", "z2")), False),
        (framework.ClusterAffinity(field_selector=(R("zone", "Exists"),)), member(), False),
        # Every part must match.
        (framework.ClusterAffinity(cluster_names=("member1",),
                                   label_selector=framework.LabelSelector({"env": "prod"}),
                                   field_selector=(R("region", "In", ("eu",)),)),
         member(labels=LABELS, region="us"), False),
    ],
)
def test_cluster_affinity(
    affinity: framework.ClusterAffinity | None, cluster: framework.ClusterView, fits: bool
) -> None:
    result = clusteraffinity.ClusterAffinity().filter(
        framework.Cycle.of(framework.PlacementView(affinity=affinity), binding()), cluster
    )
    assert result.ok is fits
    assert bool(result.reason) is not fits


# --- TaintToleration -------------------------------------------------------------------

T = framework.Taint
TOL = framework.Toleration
DEFAULT_TOLERATIONS = (
    TOL(NOT_READY, "Exists", effect="NoExecute", toleration_seconds=300),
    TOL(UNREACHABLE, "Exists", effect="NoExecute", toleration_seconds=300),
)


@pytest.mark.parametrize(
    ("taints", "tolerations", "targets", "fits", "reason"),
    [
        ((), (), (), True, ""),
        ((T(NOT_READY, "NoSchedule"),), DEFAULT_TOLERATIONS, (), False,
         "had untolerated taint {cluster.karmada.io/not-ready:NoSchedule}"),
        # Already in the result: a NoSchedule (or any) taint does not filter it.
        ((T(NOT_READY, "NoSchedule"),), DEFAULT_TOLERATIONS, ("member1",), True, ""),
        ((T(NOT_READY, "NoExecute"),), (), ("member1",), True, ""),
        # The webhook's default tolerations tolerate the NoExecute taints (for a while).
        ((T(NOT_READY, "NoExecute"),), DEFAULT_TOLERATIONS, (), True, ""),
        ((T(UNREACHABLE, "NoExecute"),), DEFAULT_TOLERATIONS[:1], (), False,
         "had untolerated taint {cluster.karmada.io/unreachable:NoExecute}"),
        # PreferNoSchedule never filters.
        ((T("slow", "PreferNoSchedule"),), (), (), True, ""),
        ((T("team", "NoSchedule", "a"),), (TOL("team", "Equal", "a"),), (), True, ""),
        ((T("team", "NoSchedule", "a"),), (TOL("team", "Equal", "b"),), (), False,
         "had untolerated taint {team=a:NoSchedule}"),
        # An empty key with Exists tolerates everything; an effect must match when given.
        ((T("x", "NoSchedule"), T("y", "NoExecute")), (TOL("", "Exists"),), (), True, ""),
        ((T("x", "NoSchedule"),), (TOL("x", "Exists", effect="NoExecute"),), (), False,
         "had untolerated taint {x:NoSchedule}"),
    ],
)
def test_taint_toleration(
    taints: tuple[framework.Taint, ...],
    tolerations: tuple[framework.Toleration, ...],
    targets: tuple[str, ...],
    fits: bool,
    reason: str,
) -> None:
    cycle = framework.Cycle.of(framework.PlacementView(tolerations=tolerations), binding(targets))
    result = tainttoleration.TaintToleration().filter(cycle, member(taints=taints))
    assert result == framework.Result(fits, reason)


# --- ClusterEviction, APIEnablement, SpreadConstraint, ClusterLocality -----------------


@pytest.mark.parametrize(
    ("evicting", "targets", "fits"),
    [((), (), True), (("member1",), (), False), (("member2",), (), True),
     # Being evicted from it wins over being a target (never back onto it).
     (("member1",), ("member1",), False)],
)
def test_cluster_eviction(evicting: tuple[str, ...], targets: tuple[str, ...], fits: bool) -> None:
    result = clustereviction.ClusterEviction().filter(
        framework.Cycle.of(framework.PlacementView(), binding(targets, evicting)), member()
    )
    assert result.ok is fits
    if not fits:
        assert result.reason == "is in the process of eviction"


@pytest.mark.parametrize(
    ("enablements", "complete", "targets", "fits", "reason"),
    [
        (APPS, True, (), True, ""),
        ({"v1": frozenset({"ConfigMap"})}, True, (), False, "does not serve Deployment (apps/v1)"),
        ({"v1": frozenset({"ConfigMap"})}, False, (), False, "list incomplete"),
        (None, True, (), False, "has not reported its APIs yet"),
        # A current target passes whatever it reports (no deletion by this filter).
        (None, True, ("member1",), True, ""),
        ({}, True, ("member1",), True, ""),
    ],
)
def test_api_enablement(
    enablements: dict[str, frozenset[str]] | None,
    complete: bool,
    targets: tuple[str, ...],
    fits: bool,
    reason: str,
) -> None:
    cluster = member(api_enablements=enablements, api_enablements_complete=complete)
    result = apienablement.APIEnablement().filter(
        framework.Cycle.of(framework.PlacementView(), binding(targets)), cluster
    )
    assert result.ok is fits
    assert reason in result.reason


@pytest.mark.parametrize(
    ("field", "cluster", "fits"),
    [
        ("cluster", member(), True),
        ("region", member(), False),
        ("region", member(region="eu"), True),
        ("zone", member(region="eu"), False),
        ("zone", member(zones=("z1",)), True),
        ("provider", member(), False),
        ("provider", member(provider="aws"), True),
    ],
)
def test_spread_constraint_filter(field: str, cluster: framework.ClusterView, fits: bool) -> None:
    placement = framework.PlacementView(spread_constraints=(spread.SpreadConstraint(field, 1, 1),))
    result = spreadconstraint.SpreadConstraint().filter(
        framework.Cycle.of(placement, binding()), cluster
    )
    assert result.ok is fits
    if not fits:
        assert f"did not have the {field}" in result.reason


def test_cluster_locality() -> None:
    score = clusterlocality.ClusterLocality().score
    current = framework.Cycle.of(framework.PlacementView(), binding(("member1",)))
    assert score(current, member("member1")) == 100
    assert score(current, member("member2")) == 0
    assert score(framework.Cycle.of(framework.PlacementView(), binding()), member("member1")) == 0


# --- Registry and --plugins ------------------------------------------------------------

ALL = [
    "ClusterAffinity", "ClusterEviction", "TaintToleration", "APIEnablement", "SpreadConstraint",
    "ClusterLocality",
]


def test_default_registry_is_explicit_and_typed() -> None:
    registry = plugins.default_registry()
    assert list(registry) == ALL
    assert all(name == plugin.name for name, plugin in registry.items())
    filters = [n for n, p in registry.items() if isinstance(p, framework.FilterPlugin)]
    scores = [n for n, p in registry.items() if isinstance(p, framework.ScorePlugin)]
    assert filters == ALL[:-1]
    assert scores == ["ClusterLocality"]
    # A new registry each time: selecting from one does not change another.
    assert plugins.default_registry() is not registry


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("*", ALL),
        ("*,-TaintToleration", [n for n in ALL if n != "TaintToleration"]),
        (" * , -TaintToleration , -ClusterLocality ", ALL[:2] + ALL[3:5]),
        ("ClusterLocality,ClusterAffinity", ["ClusterAffinity", "ClusterLocality"]),
        ("-ClusterAffinity,*", ALL[1:]),
        ("", []),
        (["*", "-APIEnablement"], [n for n in ALL if n != "APIEnablement"]),
    ],
)
def test_select_plugins(flag: str | list[str], expected: list[str]) -> None:
    assert list(framework.select_plugins(plugins.default_registry(), flag)) == expected


@pytest.mark.parametrize("flag", ["*,-NoSuchPlugin", "Taint", "*,tainttoleration"])
def test_select_plugins_unknown_name(flag: str) -> None:
    with pytest.raises(framework.PluginSelectionError, match="unknown scheduler plugin") as raised:
        framework.select_plugins(plugins.default_registry(), flag)
    assert "known scheduler plugins: ClusterAffinity, ClusterEviction" in str(raised.value)


# --- Purity ----------------------------------------------------------------------------

PACKAGE = pathlib.Path(selectors.__file__).parent


def test_scheduler_modules_import_no_io() -> None:
    """The pure modules import only the standard library's pure parts and themselves."""
    forbidden = {"asyncio", "socket", "ssl", "subprocess", "threading", "httpx", "aiohttp",
                 "os", "io", "time"}
    allowed_core = {"clusterhealth_core.selection"}  # pure: the --plugins syntax
    pure = ["__init__", "algorithm", "assignment", "errors", "framework", "selectors", "spread"]
    files = [PACKAGE / f"{name}.py" for name in pure] + sorted((PACKAGE / "plugins").glob("*.py"))
    assert len(files) == 14
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            else:
                continue
            for module in modules:
                assert module.split(".")[0] not in forbidden, (path.name, module)
                names = [f"{module}.{alias.name}" for alias in node.names] \
                    if isinstance(node, ast.ImportFrom) else modules
                core = [n for n in names if n.startswith("clusterhealth_core")]
                assert set(core) <= allowed_core, (path.name, core)
