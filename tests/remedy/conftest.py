"""Fixtures for Remedy controller tests: a running controller, cleaned-up objects."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
import remedykit

import testkit
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment


@pytest.fixture
def controllers(plane: environment.LocalEnvironment, python_env: dict[str, str],
                tmp_path: pathlib.Path) -> Iterator[Callable[..., remedykit.Controller]]:
    started: list[remedykit.Controller] = []
    lease = testkit.unique("remedy")

    def start(*extra: str) -> remedykit.Controller:
        log = tmp_path / f"remedy-{len(started)}.log"
        ctrl = remedykit.start_controller(plane, python_env, lease, log, extra)
        started.append(ctrl)
        return ctrl

    yield start
    for ctrl in started:
        ctrl.stop()


@pytest.fixture
async def cleanup(cp: kube.ApiClient) -> AsyncIterator[dict[str, list[str]]]:
    """Names to delete after the test: {"clusters": [...], "remedies": [...]}."""
    names: dict[str, list[str]] = {"clusters": [], "remedies": []}
    yield names
    for name in names["remedies"]:
        await cp.delete(resources.REMEDIES, name, missing_ok=True)
    for name in names["clusters"]:
        await cp.delete(resources.CLUSTERS, name, missing_ok=True)
