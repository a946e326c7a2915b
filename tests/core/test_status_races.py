"""``status.LostRaces``: after a lost race, the server is read only if the cache is unmoved.

A fake writer (no API server): Conflict unless the copy given is the server's version
or the write may read the server; NotFound when told the object is gone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import pytest

from clusterhealth_core import status
from clusterhealth_core.kube import errors


def copy(version: int | None) -> dict[str, Any] | None:
    return None if version is None else {"metadata": {"name": "b",
                                                      "resourceVersion": str(version)}}


class FakeWriter:
    def __init__(self, server: int) -> None:
        self.server = server
        self.gone = False
        self.tries: list[bool] = []

    async def write(self, name: str, desired: Mapping[str, Any], *, namespace: str | None,
                    cached: Mapping[str, Any] | None, reread: bool) -> dict[str, Any]:
        self.tries.append(reread)
        if self.gone:
            raise errors.NotFound(404, "NotFound", "gone")
        version = int(((cached or {}).get("metadata") or {}).get("resourceVersion") or -1)
        if version != self.server and not reread:
            raise errors.Conflict(409, "Conflict", "the object has been modified")
        if version != self.server and self.server < 0:
            raise errors.Conflict(409, "Conflict", "lost after a read too")
        return {}


@pytest.mark.parametrize(("copies", "tries", "results"), [
    ([8], [False], [True]),                          # the cache was current
    ([None], [True], [True]),                        # nothing cached: the server
    ([6, 8], [False, False], [False, True]),         # the informer moved: no read
    ([6, 6], [False, True], [False, True]),          # it did not: one read
    ([6, 8, 6], [False, False, False], [False, True, False]),  # written: forgotten
])
async def test_which_tries_read_the_server(copies: list[int | None], tries: list[bool],
                                           results: list[bool]) -> None:
    races, writer = status.LostRaces(), FakeWriter(server=8)
    got = [await races.write(cast(status.StatusWriter, writer), "ns/b", "b", {},
                             namespace="ns", cached=copy(version)) for version in copies]
    assert (writer.tries, got) == (tries, results)


async def test_lost_after_a_read_raises_and_a_gone_object_is_forgotten() -> None:
    races, writer = status.LostRaces(), FakeWriter(server=-1)
    args: dict[str, Any] = {"namespace": None, "cached": copy(6)}
    target = cast(status.StatusWriter, writer)
    assert await races.write(target, "b", "b", {}, **args) is False
    with pytest.raises(errors.Conflict):
        await races.write(target, "b", "b", {}, **args)  # the unmoved cache: a read, lost
    assert races.reread("b", copy(6))  # still: the next try reads again
    writer.gone = True
    with pytest.raises(errors.NotFound):
        await races.write(target, "b", "b", {}, **args)
    assert not races.reread("b", copy(6))
    assert writer.tries == [False, True, True]
