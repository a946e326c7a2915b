"""One fleet installed as users install it, shared by the tests of this folder (needs root).

A control plane whose cluster has a Node (the host the controllers run on), and
member1 and member2 with two Nodes each (:mod:`clusterhealth_localenv.nodes`); the
images built from the Dockerfiles (:mod:`clusterhealth_localenv.images`, cached) loaded
into every Node; every chart installed with helm, step by step as docs/operations.md
says (:mod:`clusterhealth_localenv.fleet`); and the application the stories use (a
web Deployment behind Service ``shop/web`` in both members, its MCI, the Remedy
``dns-down``).  The fleet lives for this folder's tests (package scope) and is torn
down after the last one, whose ``helm uninstall`` it is.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from clusterhealth_localenv import environment, fleet, images, nodes

Snapshot = dict[str, set[tuple[str, str, str]]]
"""Per cluster: every object as (resource, namespace, name)."""


async def snapshot(the_fleet: fleet.Fleet) -> Snapshot:
    """Every object of every listable resource in every cluster (Events left out)."""
    found: Snapshot = {}
    for cluster in [environment.CONTROL_PLANE, *the_fleet.env.members]:
        names = (await the_fleet.kubectl(cluster, "api-resources", "--verbs=list",
                                         "-o", "name")).stdout.split()
        names = [n for n in names if n not in ("events", "events.events.k8s.io",
                                               "componentstatuses")]
        listed = json.loads((await the_fleet.kubectl(
            cluster, "get", ",".join(names), "-A", "-o", "json")).stdout)
        found[cluster] = {(_resource(item), item["metadata"].get("namespace") or "",
                           item["metadata"]["name"]) for item in listed["items"]}
    return found


def _resource(item: dict[str, Any]) -> str:
    group = item["apiVersion"].rsplit("/", 1)[0] if "/" in item["apiVersion"] else ""
    return f"{item['kind']}.{group}" if group else item["kind"]


@pytest.fixture(scope="package")
async def installed(tmp_path_factory: pytest.TempPathFactory
                    ) -> AsyncIterator[tuple[fleet.Fleet, Snapshot]]:
    """The fleet, and the clusters' objects before any chart was installed."""
    began = time.monotonic()
    built = await asyncio.to_thread(images.ensure_images)
    built_at = time.monotonic()
    config = environment.EnvironmentConfig(
        members=("member1", "member2"), crds=False,
        nodes=nodes.NodeSettings(nodes=2, control_plane_nodes=1))
    async with environment.LocalEnvironment(config) as env:
        work = tmp_path_factory.mktemp("fleet")
        the_fleet = fleet.Fleet(env, built, work / "install")
        the_fleet.timings["images (build or cache)"] = built_at - began
        the_fleet.timings["environment start"] = time.monotonic() - built_at
        await the_fleet.load_images()
        before = await snapshot(the_fleet)
        await the_fleet.install()
        shop = time.monotonic()
        await the_fleet.deploy_shop(work)
        the_fleet.timings["shop (web, MCI, Remedy)"] = time.monotonic() - shop
        print("fleet set-up:", ", ".join(f"{k} {v:.1f} s" for k, v in
                                         the_fleet.timings.items()))
        yield the_fleet, before


@pytest.fixture
def installed_fleet(installed: tuple[fleet.Fleet, Snapshot]) -> fleet.Fleet:
    return installed[0]


@pytest.fixture
def workdir(installed_fleet: fleet.Fleet) -> pathlib.Path:
    return installed_fleet.workdir
