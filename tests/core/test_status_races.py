"""``status.LostRaces``: after a lost race, the server is read only if the cache is unmoved.

A fake writer (no API server): Conflict unless the copy given is the server's version
or the write may read the server; NotFound when told the object is gone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import pytest

from clusterhealth_core import clock, status
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
        return {"metadata": {"resourceVersion": str(self.server + 1)}}


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
    assert (writer.tries, [won is not None for won in got]) == (tries, results)
    assert all(won.written == {"metadata": {"resourceVersion": "9"}}  # the server's answer
               for won in got if won is not None)


async def test_lost_after_a_read_raises_and_a_gone_object_is_forgotten() -> None:
    races, writer = status.LostRaces(), FakeWriter(server=-1)
    args: dict[str, Any] = {"namespace": None, "cached": copy(6)}
    target = cast(status.StatusWriter, writer)
    assert await races.write(target, "b", "b", {}, **args) is None
    with pytest.raises(errors.Conflict):
        await races.write(target, "b", "b", {}, **args)  # the unmoved cache: a read, lost
    assert races.reread("b", copy(6))  # still: the next try reads again
    writer.gone = True
    with pytest.raises(errors.NotFound):
        await races.write(target, "b", "b", {}, **args)
    assert not races.reread("b", copy(6))
    assert writer.tries == [False, True, True]


class Ticking(clock.Clock):
    """Monotonic time moved by the test (these tests run no event loop)."""

    def __init__(self) -> None:
        self.elapsed = 0.0

    def monotonic(self) -> float:
        return self.elapsed

    def advance(self, seconds: float) -> None:
        self.elapsed += seconds


def _copy(version: str | None, **fields: Any) -> dict[str, Any]:
    metadata = {} if version is None else {"resourceVersion": version}
    return {"metadata": metadata, "status": fields}


@pytest.mark.parametrize(("steps", "compared"), [
    # nothing written: the cache
    ([("cache", "7", 3)], [3]),
    # A -> B (written at 9) -> A, the cache behind: compared with B, then the cache at 9
    ([("wrote", "9", 6), ("cache", "7", 3), ("cache", "9", 6), ("cache", "10", 3)],
     [6, 6, 3]),
    # the cache past the write (someone else wrote after us): the cache again
    ([("wrote", "9", 6), ("cache", "12", 4), ("cache", "7", 3)], [4, 3]),
    # versions that are not numbers: until the cache shows every field written
    ([("wrote", "b", 6), ("cache", "a", 3), ("cache", "c", 6), ("cache", "d", 3)], [6, 6, 3]),
    # no answer from the server (nothing writable): by the fields too
    ([("wrote", None, 6), ("cache", "7", 3), ("cache", "8", 6)], [6, 6]),
    # the object went: forgotten
    ([("wrote", "9", 6), ("forget", None, 0), ("cache", "7", 3)], [3]),
])
def test_unseen_writes_are_compared_until_the_cache_holds_them(
        steps: list[tuple[str, str | None, int]], compared: list[int]) -> None:
    unseen, got = status.UnseenWrites(Ticking()), []
    for step, version, replicas in steps:
        if step == "wrote":
            unseen.wrote("ns/web", {"replicas": replicas},
                         None if version is None else _copy(version, replicas=replicas))
        elif step == "forget":
            unseen.forget("ns/web")
        else:
            got.append(unseen.status("ns/web", _copy(version, replicas=replicas,
                                                     other="kept"))["replicas"])
    assert got == compared


def test_an_unseen_write_keeps_the_cached_fields_it_did_not_write() -> None:
    unseen = status.UnseenWrites(Ticking())
    unseen.wrote("b", {"aggregatedStatus": [1]}, _copy("9", aggregatedStatus=[1]))
    assert unseen.status("b", _copy("8", aggregatedStatus=[0], conditions=["x"])) == {
        "aggregatedStatus": [1], "conditions": ["x"]}


def test_an_unseen_write_is_what_the_server_answered() -> None:
    """On an atomic list the server's answer holds the others' conditions too."""
    unseen = status.UnseenWrites(Ticking())
    unseen.wrote("b", {"conditions": ["ours"]}, _copy("9", conditions=["theirs", "ours"]))
    assert unseen.status("b", _copy("8", conditions=["theirs"])) == {
        "conditions": ["theirs", "ours"]}


def test_an_unseen_write_is_taken_as_seen_past_the_horizon() -> None:
    """A Work deleted without its deletion being queued is not remembered for ever."""
    fake = Ticking()
    unseen = status.UnseenWrites(fake, horizon=60.0)
    unseen.wrote("a", {"replicas": 6}, _copy("9", replicas=6))
    fake.advance(30)
    unseen.wrote("b", {"replicas": 6}, _copy("10", replicas=6))
    assert unseen.status("a", _copy("7", replicas=3))["replicas"] == 6
    fake.advance(31)  # a: 61 s old, b: 31 s
    assert unseen.status("a", _copy("7", replicas=3))["replicas"] == 3
    assert unseen.status("b", _copy("7", replicas=3))["replicas"] == 6
    assert len(unseen) == 1
    fake.advance(30)
    unseen.wrote("c", {"replicas": 1}, None)  # a write sweeps the old ones too
    assert len(unseen) == 1
