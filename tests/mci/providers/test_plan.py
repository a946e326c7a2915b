"""The shared route table, weights and validation (pure), and the rendered configuration."""

from __future__ import annotations

import pathlib
import subprocess

import pytest

from clusterhealth_localenv import haproxy
from clusterhealth_mci.providers import base, plan
from clusterhealth_mci.providers.haproxy import config


def _spec(*routes: tuple[str | None, str, str, str], **kw: object) -> base.LoadBalancerSpec:
    backends = {r[3]: base.Backend(r[3].split(":")[0], r[3].split(":")[1], ())
                for r in routes}
    return base.LoadBalancerSpec("ns/mci", tuple(base.Route(*r) for r in routes), backends,
                                 **kw)  # type: ignore[arg-type]


ROUTES = _spec(
    ("shop.example.com", "/", "Prefix", "front:80"),
    ("shop.example.com", "/api", "Prefix", "api:80"),
    ("shop.example.com", "/api/v2/", "Prefix", "api2:80"),
    ("shop.example.com", "/health", "Exact", "health:80"),
    ("shop.example.com", "/api/v2", "Exact", "exactv2:80"),
    ("*.example.com", "/", "Prefix", "wild:80"),
    (None, "/status", "Exact", "status:80"),
    (None, "/", "Prefix", "default:80"),
)


@pytest.mark.parametrize(("host", "path", "backend"), [
    ("shop.example.com", "/", "front:80"),
    ("shop.example.com", "/index.html", "front:80"),
    ("shop.example.com", "/api", "api:80"),
    ("shop.example.com", "/api/", "api:80"),
    ("shop.example.com", "/api/x", "api:80"),
    ("shop.example.com", "/apix", "front:80"),  # Prefix matches whole path elements
    ("shop.example.com", "/api/v2", "exactv2:80"),  # Exact wins at equal length
    ("shop.example.com", "/api/v2/x", "api2:80"),  # the longest prefix wins
    ("shop.example.com", "/health", "health:80"),
    ("shop.example.com", "/health/x", "front:80"),  # Exact is exact
    ("SHOP.Example.com:8080", "/api", "api:80"),  # case and port do not matter
    ("blog.example.com", "/x", "wild:80"),  # wildcard: one label
    ("a.blog.example.com", "/x", "default:80"),  # ... not two
    ("example.com", "/x", "default:80"),  # ... and not none
    ("other.org", "/status", "status:80"),
    ("other.org", "/status/x", "default:80"),
    (None, "/x", "default:80"),  # no Host header: any-host routes
])
def test_route_table(host: str | None, path: str, backend: str) -> None:
    assert plan.resolve(plan.route_entries(ROUTES), host, path) == backend


def test_no_route_is_none() -> None:
    spec = _spec(("shop.example.com", "/api", "Prefix", "api:80"))
    assert plan.resolve(plan.route_entries(spec), "other.org", "/api") is None
    assert plan.resolve(plan.route_entries(spec), "shop.example.com", "/") is None


def test_entries_are_keyed_by_host_and_path() -> None:
    spec = _spec(("Shop.example.com", "/api/", "ImplementationSpecific", "api:80"),
                 (None, "/", "Prefix", "default:80"),
                 ("shop.example.com", "/api", "Exact", "exact:80"))
    assert plan.route_entries(spec) == {
        plan.MapEntry("exact", "shop.example.com/api"): "exact:80",  # Exact beats implied
        plan.MapEntry("prefix", "shop.example.com/api/"): "api:80",
        plan.MapEntry("prefix", "/"): "default:80",
    }


def test_conflicts_name_the_owner() -> None:
    entries = plan.route_entries(_spec((None, "/", "Prefix", "default:80")))
    owners = dict.fromkeys(entries, "ns/other")
    assert plan.conflicts(owners, "ns/mci", entries) == ["prefix '/' is served for ns/other"]
    assert plan.conflicts(owners, "ns/other", entries) == []


@pytest.mark.parametrize(("route", "problem"), [
    (("shop.example.com", "api", "Prefix", "api:80"), "must start with '/'"),
    (("shop.example.com", "/a b", "Prefix", "api:80"), "without spaces"),
    (("shop.example.com", "/api", "Regex", "api:80"), "path type"),
    (("shop_example.com", "/api", "Prefix", "api:80"), "not a DNS name"),
    (("shop.example.com:80", "/api", "Prefix", "api:80"), "not a DNS name"),
    # Kubernetes' Ingress rules for Exact and Prefix paths
    (("shop.example.com", "/a//b", "Prefix", "api:80"), "must not contain '//'"),
    (("shop.example.com", "/a/../b", "Exact", "api:80"), "must not contain '/../'"),
    (("shop.example.com", "/a%2Fb", "Prefix", "api:80"), "must not contain '%2F'"),
    (("shop.example.com", "/a/..", "Prefix", "api:80"), "cannot end with '/..'"),
    # ImplementationSpecific is served as Prefix: a regular expression or glob is refused
    (("shop.example.com", "/api/.*", "ImplementationSpecific", "api:80"),
     "looks like a regular expression"),
    (("shop.example.com", "/static/*", "ImplementationSpecific", "api:80"), "for example"),
    (("shop.example.com", "/(v1|v2)/", "ImplementationSpecific", "api:80"), "Prefix"),
])
def test_invalid_routes(route: tuple[str | None, str, str, str], problem: str) -> None:
    with pytest.raises(base.InvalidSpec, match=problem):
        plan.validate(_spec(route))


@pytest.mark.parametrize("route", [
    ("shop.example.com", "/.well-known/acme", "Prefix", "api:80"),
    ("shop.example.com", "/a.b/c-d_e~f", "Exact", "api:80"),
    ("shop.example.com", "/api/v1.2", "ImplementationSpecific", "api:80"),
    ("shop.example.com", "/a//b", "ImplementationSpecific", "api:80"),  # only Exact/Prefix
])
def test_valid_unusual_paths(route: tuple[str | None, str, str, str]) -> None:
    plan.validate(_spec(route))


def test_route_conflict_names_the_holders() -> None:
    entries = plan.route_entries(_spec((None, "/", "Prefix", "default:80"),
                                       ("a.example", "/x", "Exact", "default:80")))
    owners = {plan.MapEntry("prefix", "/"): "ns/b", plan.MapEntry("exact", "a.example/x"): "ns/a"}
    clash = plan.route_conflict(owners, "ns/mci", entries)
    assert clash is not None
    assert clash.holders == ("ns/a", "ns/b")
    assert "served for ns/a" in str(clash) and "served for ns/b" in str(clash)
    assert plan.route_conflict({}, "ns/mci", entries) is None


def test_invalid_backends_and_weights() -> None:
    spec = base.LoadBalancerSpec(
        "ns/mci", (base.Route(None, "/", "Prefix", "missing:80"),),
        {"web:80": base.Backend("web", "80", (base.Endpoint("m1", "not-an-ip", 0),))},
        cluster_weights={"m1": 0, "m2": 257})
    with pytest.raises(base.InvalidSpec) as caught:
        plan.validate(spec)
    for problem in ("unknown backend 'missing:80'", "'not-an-ip' is not an IP address",
                    "port 0 out of range", "weight 0", "weight 257"):
        assert problem in str(caught.value)


def test_weights_are_per_cluster() -> None:
    endpoints = (base.Endpoint("m1", "10.0.0.1", 80), base.Endpoint("m1", "10.0.0.2", 80),
                 base.Endpoint("m2", "10.0.1.1", 80))
    backend = base.Backend("web", "80", endpoints)
    spec = base.LoadBalancerSpec("ns/mci", (), {"web:80": backend})
    weights = plan.server_weights(spec, backend)
    # Two endpoints share member1's weight: each cluster gets half.
    assert weights == {endpoints[0]: 128, endpoints[1]: 128, endpoints[2]: 256}
    spec = base.LoadBalancerSpec("ns/mci", (), {"web:80": backend},
                                 cluster_weights={"m1": 200, "m2": 1})
    weights = plan.server_weights(spec, backend)
    assert weights[endpoints[0]] == 256 and weights[endpoints[2]] == 3  # 100:1 per endpoint
    assert plan.server_weights(spec, base.Backend("web", "80", ())) == {}


def test_status_lists_clusters_once() -> None:
    a, b = base.Endpoint("m1", "10.0.0.1", 80), base.Endpoint("m2", "10.0.1.1", 80)
    c = base.Endpoint("m2", "10.0.1.2", 80)
    spec = base.LoadBalancerSpec("ns/mci", (), {"web:80": base.Backend("web", "80", (a, b))})
    status = plan.status_of(spec, (("192.0.2.1", 80),),
                            {"web:80": {a: "ready", b: "ready", c: "drain"}})
    assert status.active == {"web:80": ("m1", "m2")}
    assert status.draining == {"web:80": ("m2",)}


def test_layout_validation_and_names() -> None:
    layout = config.HAProxyLayout(slots=3, servers_per_slot=2, map_dir="/etc/haproxy/mci")
    assert layout.slot_name(2) == "mci_slot_2"
    assert layout.slot_index("mci_slot_2") == 2
    assert layout.slot_index("mci_slot_3") is None
    assert layout.slot_index("mci_slot_02") is None
    assert layout.server_number("s2") == 2
    assert layout.server_number("s3") is None
    assert layout.exact_map == "/etc/haproxy/mci/exact.map"
    assert layout.ingress == (("0.0.0.0", 80),)
    assert config.HAProxyLayout(admin_socket="127.0.0.1:9999").admin_socket_bind() == \
        "ipv4@127.0.0.1:9999"
    with pytest.raises(ValueError, match="servers_per_slot"):
        config.HAProxyLayout(servers_per_slot=5000)
    with pytest.raises(ValueError, match="slots"):
        config.HAProxyLayout(slots=0)


def test_default_layout_is_valid_for_haproxy(tmp_path: pathlib.Path) -> None:
    """256 slots x 32 servers, as shipped, passes ``haproxy -c`` on the installed HAProxy."""
    layout = config.HAProxyLayout(map_dir=str(tmp_path / "maps"),
                                  admin_socket=str(tmp_path / "admin.sock"))
    config.write_map_files(layout)
    path = tmp_path / "haproxy.cfg"
    text = config.render(layout)
    path.write_text(text)
    assert text.count("server-template s 1-32 ") == 256
    checked = subprocess.run([haproxy.find_haproxy(), "-c", "-f", str(path)],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
