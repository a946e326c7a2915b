"""Fixtures over ``node_env``: the test image loaded into member1's Nodes, and a toolbox Pod
on each Node to run commands in."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator

import nodekit
import pytest

from clusterhealth_core.kube import resources
from clusterhealth_localenv import binaries, environment, folderimages

NAMESPACE = nodekit.NAMESPACE


@pytest.fixture(scope="session")
async def busybox(node_env: environment.LocalEnvironment,
                  tmp_path_factory: pytest.TempPathFactory) -> folderimages.Image:
    """The busybox test image, loaded into every Node of member1."""
    archive = tmp_path_factory.mktemp("images") / "busybox.tar"
    image = await asyncio.to_thread(folderimages.busybox_image, archive, nodekit.IMAGE)
    await node_env.node_cluster(nodekit.MEMBER).load_image(image.archive)
    return image


@pytest.fixture(scope="session")
def kubectl() -> pathlib.Path:
    return binaries.ensure_kubectl()


@pytest.fixture(scope="session")
async def toolboxes(node_env: environment.LocalEnvironment, busybox: folderimages.Image,
                    kubectl: pathlib.Path) -> AsyncIterator[dict[str, str]]:
    """A long-running busybox Pod on each Node of member1: Node name -> Pod name."""
    del busybox
    cluster = node_env.node_cluster(nodekit.MEMBER)
    made = {node: f"toolbox-{node.rsplit('-', 1)[-1]}" for node in cluster.node_names}
    async with node_env.client(nodekit.MEMBER) as api:
        await nodekit.ensure_namespace(api, NAMESPACE)
        for node, name in made.items():
            await api.create(resources.PODS, nodekit.pod(name, NAMESPACE, "sleep 100000",
                                                         node=node), namespace=NAMESPACE)
        await asyncio.gather(*(nodekit.wait_running(api, name, NAMESPACE)
                               for name in made.values()))
    yield made
    async with node_env.client(nodekit.MEMBER) as api:
        for name in made.values():
            await api.delete(resources.PODS, name, namespace=NAMESPACE, missing_ok=True)


@pytest.fixture
def pods(node_env: environment.LocalEnvironment, kubectl: pathlib.Path) -> nodekit.Pods:
    return nodekit.Pods(node_env, kubectl, NAMESPACE)
