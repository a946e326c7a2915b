"""Session-wide fixtures: real local environments (etcd + kube-apiservers).

Each environment starts once per test session, when a test first needs it,
and is always stopped, also when tests fail.  A missing binary is a failure,
never a skip.

``plane`` is the environment a test's control plane is: ours (``env``) unless
the test is marked ``@pytest.mark.planes("ours", "karmada")``, which runs it
once against each (``karmada_env``: Karmada's own API, see
:mod:`clusterhealth_localenv.karmada`).  ``cp``, ``members`` and the
add-ons' kits follow ``plane``.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import sys
from collections.abc import AsyncIterator

import pytest

from clusterhealth_core.kube import client as kube
from clusterhealth_localenv import environment, nodes, workloads

REPO = pathlib.Path(__file__).resolve().parents[1]
PROMTOOL = pathlib.Path("/usr/bin/promtool")


@pytest.fixture(scope="session")
async def env() -> AsyncIterator[environment.LocalEnvironment]:
    config = environment.EnvironmentConfig(members=("member1", "member2"))
    async with environment.LocalEnvironment(config) as local:
        yield local


@pytest.fixture(scope="session")
async def audited_env() -> AsyncIterator[environment.LocalEnvironment]:
    """A second environment whose API servers write audit logs (who sent what, when).

    Kept apart from ``env`` so that tests counting requests see only their own
    traffic and tests loading thousands of objects do not slow the others.
    """
    config = environment.EnvironmentConfig(members=("member2",), audit=True)
    async with environment.LocalEnvironment(config) as local:
        yield local


@pytest.fixture(scope="session")
async def workload_env() -> AsyncIterator[environment.LocalEnvironment]:
    """Members that run workloads: kube-controller-manager, kube-scheduler and kwok each.

    Two simulated Nodes per member (:mod:`clusterhealth_localenv.workloads`), so
    a Deployment created in a member gets Pods that become Running and Ready.
    """
    config = environment.EnvironmentConfig(members=("member1", "member2"),
                                           workloads=workloads.WorkloadSettings())
    async with environment.LocalEnvironment(config) as local:
        yield local


@pytest.fixture(scope="session")
async def node_env() -> AsyncIterator[environment.LocalEnvironment]:
    """A control plane and member1, whose two Nodes run containers (needs root).

    kubelet, containerd, runc, a CNI bridge and kube-proxy per Node, and CoreDNS behind
    ``kube-dns`` (:mod:`clusterhealth_localenv.nodes`); ``node_env.node_cluster("member1")``
    loads images and stops kubelets.  The control plane stays a bare API server.
    """
    config = environment.EnvironmentConfig(members=("member1",),
                                           nodes=nodes.NodeSettings(nodes=2))
    async with environment.LocalEnvironment(config) as local:
        yield local


@pytest.fixture(scope="session")
async def karmada_env() -> AsyncIterator[environment.LocalEnvironment]:
    """Karmada's control plane (its aggregated apiserver, CRDs and controller-manager).

    ``karmada-controller-manager`` runs ``cluster,clusterStatus`` with the
    environment's fast status timings (2 s updates), so Karmada writes
    ``Ready`` and ``CompleteAPIEnablements`` on the members beside our writers.
    """
    config = environment.EnvironmentConfig(members=("member1", "member2"),
                                           control_plane="karmada")
    async with environment.LocalEnvironment(config) as local:
        yield local


PLANES = {"ours": "env", "karmada": "karmada_env"}
"""The control planes a test can be run against, and their environment fixtures."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "planes(*names): run the test against each named control plane "
        f"({', '.join(PLANES)}); the fixture ``plane`` is that environment")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("planes")
    if marker is not None:
        unknown = set(marker.args) - set(PLANES)
        if unknown or not marker.args:
            raise pytest.UsageError(f"planes{marker.args}: name some of {sorted(PLANES)}")
        metafunc.parametrize("plane", marker.args, indirect=True)


@pytest.fixture
def plane(request: pytest.FixtureRequest) -> environment.LocalEnvironment:
    """The environment whose control plane this test runs against (ours by default)."""
    name = getattr(request, "param", "ours")
    local = request.getfixturevalue(PLANES[name])
    assert isinstance(local, environment.LocalEnvironment)
    return local


@pytest.fixture
async def cp(plane: environment.LocalEnvironment) -> AsyncIterator[kube.ApiClient]:
    async with plane.client() as api:
        yield api


@pytest.fixture
async def members(
    plane: environment.LocalEnvironment,
) -> AsyncIterator[dict[str, kube.ApiClient]]:
    clients = {name: plane.client(name) for name in plane.members}
    try:
        yield clients
    finally:
        for api in clients.values():
            await api.close()


@pytest.fixture(scope="session")
def python_env() -> dict[str, str]:
    """Environment for child Python processes that import the project (never mutated)."""
    paths = [str(REPO / p) for p in ("core", "agent", "remedy", "mci-provider", "controlplane",
                                      "cli")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


@pytest.fixture
def python() -> str:
    return sys.executable


@pytest.fixture(scope="session")
def promtool() -> str:
    """promtool, from Debian's ``prometheus`` package (the bootstrap installs it): missing,
    the tests that need it fail, never skip."""
    found = str(PROMTOOL) if PROMTOOL.exists() else shutil.which("promtool")
    if not found:
        pytest.fail(f"promtool not found at {PROMTOOL} or on PATH: install Debian's "
                    "'prometheus' package (scripts/bootstrap.sh does)")
    return found
