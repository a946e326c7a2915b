"""Session-wide fixtures: one real local environment (etcd + kube-apiservers).

The environment starts once per test session and is always stopped, also
when tests fail.  A missing binary is a failure, never a skip.
"""

from __future__ import annotations

import os
import pathlib
import sys
from collections.abc import AsyncIterator

import pytest

from clusterhealth_core.kube import client as kube
from clusterhealth_localenv import environment

REPO = pathlib.Path(__file__).resolve().parents[1]


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


@pytest.fixture
async def cp(env: environment.LocalEnvironment) -> AsyncIterator[kube.ApiClient]:
    async with env.client() as api:
        yield api


@pytest.fixture
async def members(
    env: environment.LocalEnvironment,
) -> AsyncIterator[dict[str, kube.ApiClient]]:
    clients = {name: env.client(name) for name in env.members}
    try:
        yield clients
    finally:
        for api in clients.values():
            await api.close()


@pytest.fixture
def python_env() -> dict[str, str]:
    """Environment for child Python processes that import the project."""
    paths = [str(REPO / p) for p in ("core", "agent", "remedy", "mci-provider", "controlplane")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


@pytest.fixture
def python() -> str:
    return sys.executable
