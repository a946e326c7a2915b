"""The generated go.mod pins every staging module to the matching v0.N.M release."""

from __future__ import annotations

import pytest

from clusterhealth_localenv import binaries

UPSTREAM = """module k8s.io/kubernetes

go 1.24.0

require (
\tgo.etcd.io/etcd/server/v3 v3.6.4 // indirect
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/apiserver => ./staging/src/k8s.io/apiserver
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
)
"""


def test_replace_lines_pin_staging_modules() -> None:
    gomod = binaries.kubernetes_gomod("v1.34.4", UPSTREAM)
    assert "\tk8s.io/kubernetes v1.34.4" in gomod
    assert "\tgo.etcd.io/etcd/server/v3 v3.6.4" in gomod
    for module in ("k8s.io/api", "k8s.io/apiserver", "k8s.io/client-go"):
        assert f"\t{module} => {module} v0.34.4" in gomod
    assert "./staging" not in gomod


@pytest.mark.parametrize(
    ("version", "upstream", "message"),
    [("v1.34.4", "module k8s.io/kubernetes\n", "no staging modules"),
     ("1.34", UPSTREAM, "unsupported Kubernetes version")],
)
def test_bad_inputs(version: str, upstream: str, message: str) -> None:
    with pytest.raises(binaries.ProvisionError, match=message):
        binaries.kubernetes_gomod(version, upstream)


def test_version_is_stamped_into_the_binary() -> None:
    flags = binaries._version_ldflags("v1.34.4")
    assert "k8s.io/component-base/version.gitVersion=v1.34.4" in flags
    assert "gitMinor=34" in flags
