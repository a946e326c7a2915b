"""The fixtures every chart test module shares: helm, and rendering the module's chart.

A module names its chart in ``CHART`` (a folder of ``charts/``) and, to render it,
the ``RELEASE`` and ``NAMESPACE`` it is rendered as; these fixtures read them
from the module (``request.module``), so each module says only which chart.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import chartkit
import pytest

from clusterhealth_localenv import binaries


@pytest.fixture(scope="module")
def helm(request: pytest.FixtureRequest) -> str:
    """The helm binary (checking the module's chart carries its dependencies, if it has one)."""
    chart: pathlib.Path | None = getattr(request.module, "CHART", None)
    return chartkit.helm_for(chart) if chart is not None else str(binaries.ensure_helm())


@pytest.fixture
def render(request: pytest.FixtureRequest, helm: str, tmp_path: pathlib.Path) -> chartkit.Render:
    """Render the module's chart with ``values`` (a dict) and ``--set`` items; fail if helm does."""
    module = request.module
    return chartkit.renderer(helm, module.CHART, module.RELEASE, module.NAMESPACE, tmp_path)


@pytest.fixture
def render_error(request: pytest.FixtureRequest, helm: str,
                 tmp_path: pathlib.Path) -> Callable[..., str]:
    """Render the module's chart expecting helm to refuse; return its error output."""
    module = request.module
    return chartkit.error_renderer(helm, module.CHART, module.RELEASE, module.NAMESPACE, tmp_path)
