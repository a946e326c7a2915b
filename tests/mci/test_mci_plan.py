"""The MCI plan as a table: locations, blocked clusters, fail-open, routes."""

from __future__ import annotations

from typing import Any

import pytest

from clusterhealth_core.api import mci
from clusterhealth_mci import plan, routes
from clusterhealth_mci.providers import plan as routing

TC = ("TrafficControl",)


def spec(**extra: Any) -> mci.IngressSpec:
    body: dict[str, Any] = {"rules": [{"host": "shop.example", "http": {"paths": [
        {"path": "/api", "pathType": "Prefix",
         "backend": {"service": {"name": "api", "port": {"number": 80}}}},
        {"path": "/web", "pathType": "Exact",
         "backend": {"service": {"name": "web", "port": {"name": "http"}}}}]}}]}
    body.update(extra)
    return mci.IngressSpec.from_dict(body)


ENDPOINTS = {
    ("m1", "api", "80"): [("10.1.0.1", 8080)], ("m2", "api", "80"): [("10.2.0.1", 8080)],
    ("m1", "web", "http"): [("10.1.0.2", 8000)],
}


@pytest.mark.parametrize(
    ("located", "actions", "fail_open", "blocked", "opened", "effective"),
    [
        pytest.param({"api": ["m1", "m2"], "web": ["m1"]}, {}, True, (), False, set(),
                     id="nothing blocked"),
        pytest.param({"api": ["m2", "m1"], "web": ["m1"]}, {"m1": TC}, True, ("m1",), False,
                     {"m1"}, id="one of two blocked"),
        pytest.param({"api": ["m1", "m2"], "web": ["m1"]}, {"m1": TC, "m2": TC}, True,
                     ("m1", "m2"), True, set(), id="all blocked: fail open"),
        pytest.param({"api": ["m1", "m2"], "web": ["m1"]}, {"m1": TC, "m2": TC}, False,
                     ("m1", "m2"), False, {"m1", "m2"}, id="all blocked, fail-open off"),
        pytest.param({"api": ["m1"], "web": ["m1"]}, {"m2": TC}, True, (), False, set(),
                     id="blocked cluster not located"),
        pytest.param({}, {"m1": TC}, True, (), False, set(), id="no locations"),
        pytest.param({"api": ["m1"]}, {"m1": ("Other",)}, True, (), False, set(),
                     id="other actions do not block"),
    ],
)
def test_blocking(located: dict[str, list[str]], actions: dict[str, tuple[str, ...]],
                  fail_open: bool, blocked: tuple[str, ...], opened: bool,
                  effective: set[str]) -> None:
    result = plan.make_plan("ns/shop", spec(), located, ENDPOINTS, actions, fail_open=fail_open)
    assert result.traffic_block_clusters == blocked
    assert result.fail_open is opened
    assert result.spec.blocked_clusters == frozenset(effective)


def test_locations_routes_and_endpoints() -> None:
    result = plan.make_plan("ns/shop", spec(defaultBackend={"service": {
        "name": "api", "port": {"number": 80}}}), {"api": ["m2", "m1"], "web": ["m1"]},
        ENDPOINTS, {})
    assert result.service_locations == (("api", ("m1", "m2")), ("web", ("m1",)))
    assert result.status_fields() == {"serviceLocations": [
        {"name": "api", "clusters": ["m1", "m2"]}, {"name": "web", "clusters": ["m1"]}]}
    assert [(r.host, r.path, r.path_type, r.backend) for r in result.spec.routes] == [
        ("shop.example", "/api", "Prefix", "api:80"),
        ("shop.example", "/web", "Exact", "web:http"),
        (None, "/", "Prefix", "api:80"),
    ]
    api = result.spec.backends["api:80"]
    assert [(e.cluster, e.address, e.port) for e in api.endpoints] == [
        ("m1", "10.1.0.1", 8080), ("m2", "10.2.0.1", 8080)]


def test_service_without_clusters_is_listed_without_clusters() -> None:
    result = plan.make_plan("ns/shop", spec(), {"api": ["m1"]}, ENDPOINTS, {})
    assert result.status_fields()["serviceLocations"] == [
        {"name": "api", "clusters": ["m1"]}, {"name": "web"}]


def test_resource_backends_are_reported_unsupported() -> None:
    result = plan.make_plan("ns/x", mci.IngressSpec.from_dict({"defaultBackend": {"resource": {
        "apiGroup": "k8s.example.com", "kind": "Bucket", "name": "b"}}}), {}, {}, {})
    assert result.unsupported == ("*/",)
    assert result.spec.routes == ()


@pytest.mark.parametrize(
    ("text", "weights"),
    [(None, {}), ("", {}), ("member1=100, member2=50", {"member1": 100, "member2": 50}),
     ("m1=1,", {"m1": 1})],
)
def test_weights_annotation(text: str | None, weights: dict[str, int]) -> None:
    assert plan.parse_weights(text) == weights


@pytest.mark.parametrize("text", ["m1", "m1=0", "m1=257", "=5", "m1=x"])
def test_bad_weights_named(text: str) -> None:
    with pytest.raises(ValueError, match="cluster-weights"):
        plan.parse_weights(text)


def test_weights_reach_the_spec() -> None:
    result = plan.make_plan("ns/shop", spec(), {"api": ["m1", "m2"]}, ENDPOINTS, {},
                            weights={"m1": 200})
    assert result.spec.weight_of("m1") == 200
    assert result.spec.weight_of("m2") == 100


def _mci(paths: list[dict[str, Any]], host: str = "shop.example", *, name: str = "shop",
         created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": "7",
                         "creationTimestamp": created},
            "spec": {"rules": [{"host": host, "http": {"paths": paths}}]}}


def _path(path: str | None, path_type: str = "Prefix", service: str = "web",
          port: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"pathType": path_type, "backend": {"service": {
        "name": service, "port": port or {"number": 80}}}}
    if path is not None:
        body["path"] = path
    return body


def test_analysis_lists_the_claimed_entries_and_services() -> None:
    found = plan.analyse("ns/shop", _mci([_path("/api"), _path("/x", "Exact", "other")]))
    assert found.error == ""
    assert found.version == "7"  # no generation: the resourceVersion
    assert found.precedence == ("2026-01-01T00:00:00Z", "ns/shop")
    assert found.services == frozenset({"web", "other"})
    assert dict(found.claims) == {
        routing.MapEntry("exact", "shop.example/api"): "shop.example/api (Prefix)",
        routing.MapEntry("prefix", "shop.example/api/"): "shop.example/api (Prefix)",
        routing.MapEntry("exact", "shop.example/x"): "shop.example/x (Exact)",
    }


@pytest.mark.parametrize(("paths", "problem"), [
    # Karmada's own CRD has no CEL rule: a relative path reaches the controller.
    ([_path("api")], "must be an absolute path"),
    ([_path("/a b")], "without spaces"),
    ([_path("/api/.*", "ImplementationSpecific")], "regular expression"),
    ([_path("/a//b")], "must not contain '//'"),
])
def test_analysis_reports_what_cannot_be_served(paths: list[dict[str, Any]],
                                                problem: str) -> None:
    found = plan.analyse("ns/shop", _mci(paths))
    assert problem in found.error
    assert not found.error.startswith("ns/shop")
    assert found.claims == {}


PORTS = [("http", 80), ("", 8443)]


@pytest.mark.parametrize(("port", "ports", "fatal", "partial"), [
    pytest.param("http", {("m1", "web"): PORTS}, [], [], id="by name"),
    pytest.param("8443", {("m1", "web"): PORTS}, [], [], id="by number"),
    pytest.param("web", {("m1", "web"): PORTS, ("m2", "web"): PORTS},
                 ["Service web has no port named 'web' in m1, m2 (its ports: 80/http, 8443)"],
                 [], id="nowhere"),
    pytest.param("81", {("m1", "web"): PORTS}, ["Service web has no port 81 in m1"], [],
                 id="number nowhere"),
    pytest.param("http", {("m1", "web"): PORTS, ("m2", "web"): [("other", 80)]}, [],
                 ["Service web has no port named 'http' in m2, which get none of its traffic"],
                 id="partial"),
    pytest.param("web", {("m1", "web"): None, ("m2", "web"): None}, [], [],
                 id="Service not known: no verdict"),
    pytest.param("web", {("m1", "web"): None, ("m2", "web"): PORTS},
                 ["Service web has no port named 'web' in m2"], [],
                 id="the known cluster decides"),
])
def test_port_problems(port: str, ports: dict[tuple[str, str], Any], fatal: list[str],
                       partial: list[str]) -> None:
    got_fatal, got_partial = plan.port_problems(
        [("web", port)], {"web": ["m1", "m2"]}, ports)
    assert len(got_fatal) == len(fatal)
    for got, want in zip(got_fatal, fatal, strict=True):
        assert got.startswith(want)
    assert got_partial == partial


def test_status_lists_are_cut_to_the_crd_bounds() -> None:
    clusters = [f"c{i:05d}" for i in range(mci.MAX_CLUSTERS + 5)]
    actions = {c: TC for c in clusters[:-1]}  # one left unblocked: no fail-open
    result = plan.make_plan("ns/shop", spec(), {"api": clusters}, {}, actions)
    fields = result.status_fields()
    assert len(fields["trafficBlockClusters"]) == mci.MAX_CLUSTERS  # type: ignore[arg-type]
    locations = fields["serviceLocations"]
    assert isinstance(locations, list)
    assert len(locations[0]["clusters"]) == mci.MAX_CLUSTERS
    notes = result.left_out()
    assert f"serviceLocations of api lists {mci.MAX_CLUSTERS} clusters, 5 more not listed" \
        in notes
    assert f"trafficBlockClusters lists {mci.MAX_CLUSTERS} clusters, 4 more blocked but " \
        "not listed" in notes
    assert mci.MultiClusterIngressStatus.from_dict(fields).traffic_block_clusters


def test_the_route_index_follows_claims_services_and_locations() -> None:
    index = routes.RouteIndex()
    shop = _mci([_path("/api")], name="shop")
    before, after = index.update("ns/shop", shop)
    assert before is None and after is not None and index.get("ns/shop") is after
    assert index.analyse("ns/shop", shop) is after  # the same spec: not analysed again
    _, other = index.update("ns/other", _mci([_path("/api", service="other")], name="other"))
    assert set(index.sharers("ns/shop", after)) == {"ns/other"}  # once per shared entry
    assert index.using("ns", "web") == ["ns/shop"] and index.using("ns", "other") == ["ns/other"]
    index.locate("ns/shop", frozenset({"m1", "m2"}))
    assert index.located_on("m2") == ["ns/shop"] and index.located_on("m3") == []
    moved = _mci([_path("/web")], name="shop")
    moved["metadata"]["generation"] = 2
    was, now = index.update("ns/shop", moved)
    assert was is after and now is not None and now is not after
    assert index.sharers("ns/shop", now) == []
    assert set(index.sharers("ns/shop", was)) == {"ns/other"}
    assert index.update("ns/shop", None) == (now, None)
    index.locate("ns/shop", None)
    assert index.get("ns/shop") is None and index.using("ns", "web") == []
    assert index.located_on("m1") == [] and list(index.claimants) == list(other.claims)
