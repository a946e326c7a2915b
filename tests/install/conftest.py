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

import pathlib
from collections.abc import AsyncIterator

import installkit as kit
import pytest

from clusterhealth_localenv import fleet


@pytest.fixture(scope="package")
async def installed(tmp_path_factory: pytest.TempPathFactory
                    ) -> AsyncIterator[tuple[fleet.Fleet, kit.Snapshot]]:
    """The fleet, and the clusters' objects before any chart was installed."""
    before: kit.Snapshot = {}

    async def record(the_fleet: fleet.Fleet) -> None:
        before.update(await kit.snapshot(the_fleet))

    async with fleet.running(tmp_path_factory.mktemp("fleet"), before_install=record
                             ) as the_fleet:
        print("fleet set-up:", ", ".join(f"{k} {v:.1f} s" for k, v in
                                         the_fleet.timings.items()))
        yield the_fleet, before


@pytest.fixture
def installed_fleet(installed: tuple[fleet.Fleet, kit.Snapshot]) -> fleet.Fleet:
    return installed[0]


@pytest.fixture
def workdir(installed_fleet: fleet.Fleet) -> pathlib.Path:
    return installed_fleet.workdir
