"""The helpers every kind of test shares: unique names, waiting, a Cluster object.

Before this module each kit (and some test modules) wrote these again; one
copy here keeps them alike.  ``tests/`` is on the path of every test (pytest
puts the folder of ``tests/conftest.py`` there), so any test says
``import testkit``.  The polling itself is the harness's
(:func:`clusterhealth_localenv.waiting.eventually`, shared with the
benchmarks); this sets the suite's defaults.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import waiting

T = TypeVar("T")

UNREACHABLE = "https://127.0.0.1:1"
"""The API endpoint of a Cluster that no test ever reaches."""


def unique(prefix: str) -> str:
    """``prefix`` and six random hex digits: a name no other test (or run) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


async def eventually(check: Callable[[], Awaitable[T | None] | T | None],
                     timeout: float = 60.0, what: str = "condition", *,
                     interval: float = 0.2,
                     not_yet: tuple[type[Exception], ...] = (errors.KubeError,),
                     process: waiting.Watched | None = None) -> T:
    """``check()``'s first truthy result (plain or async check); fail after ``timeout``.

    ``what`` names the awaited state in the failure; an API error counts as
    "not yet" unless ``not_yet`` narrows it; with ``process``, fail at once
    when it exits, quoting its log.
    """
    result: T = await waiting.eventually(check, timeout=timeout, interval=interval, what=what,
                                         not_yet=not_yet, process=process)
    return result


def cluster_object(name: str, taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A Push-mode Cluster whose API endpoint is unreachable, with ``taints`` if any."""
    spec: dict[str, Any] = {"apiEndpoint": UNREACHABLE, "syncMode": "Push"}
    if taints:
        spec["taints"] = list(taints)
    return {"apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
            "metadata": {"name": name}, "spec": spec}


async def make_cluster(cp: kube.ApiClient, name: str,
                       taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Create :func:`cluster_object` on the control plane ``cp``; the object created."""
    created: dict[str, Any] = await cp.create(resources.CLUSTERS, cluster_object(name, taints))
    return created
