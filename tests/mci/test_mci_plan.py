"""The MCI plan as a table: locations, blocked clusters, fail-open, routes."""

from __future__ import annotations

from typing import Any

import pytest

from clusterhealth_core.api import mci
from clusterhealth_mci import plan

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
