"""The cluster-status controller's discovery reads: parsed again only when a member's changed.

Against a real kube-apiserver (``env``'s member1: its tags, its 304s, a CRD
that changes ``/apis``), and a loopback stand-in for what a real one cannot be
made to do on demand (fail one read, send no tags).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from clusterhealth_controlplane.clusterstatus import decision, discovery
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config, resources
from clusterhealth_localenv import environment, waiting

CORE = {"kind": "APIGroupDiscoveryList", "items": [{"metadata": {}, "versions": [
    {"version": "v1", "resources": [{"resource": "pods", "responseKind": {"kind": "Pod"}}]}]}]}
GROUPS = {"kind": "APIGroupDiscoveryList", "items": [{"metadata": {"name": "apps"}, "versions": [
    {"version": "v1", "resources": [{"resource": "deployments",
                                     "responseKind": {"kind": "Deployment"}}]}]}]}


class TaggingMember:
    """A loopback server with aggregated discovery, tagged (or not) like an API server's."""

    def __init__(self) -> None:
        self.documents: dict[str, dict[str, Any]] = {"/api": CORE, "/apis": GROUPS}
        self.tagged = True
        self.failing = False
        self.silent = False
        """Answer nothing (each request waits until the test's server stops)."""
        self.released = asyncio.Event()
        self.seen: list[tuple[str, str | None]] = []
        """(path, If-None-Match) of every request."""
        self.url = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append((request.path, request.headers.get("If-None-Match")))
        if self.silent:
            await self.released.wait()
        if self.failing:
            return web.json_response({"kind": "Status", "code": 500}, status=500)
        body = json.dumps(self.documents[request.path])
        etag = f'"{hashlib.sha256(body.encode()).hexdigest()}"'
        headers = {"ETag": etag} if self.tagged else {}
        if self.tagged and request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers=headers)
        return web.Response(text=body, content_type="application/json", headers=headers)


@pytest.fixture
async def member() -> AsyncIterator[TaggingMember]:
    fake = TaggingMember()
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    fake.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield fake
    finally:
        fake.released.set()
        await runner.cleanup()


def client(url: str) -> kube.ApiClient:
    return kube.ApiClient(config.Credentials(server=url, token="t"), environ={})


async def test_unchanged_documents_are_not_parsed_again_and_a_change_is(
        member: TaggingMember) -> None:
    reads = discovery.Discovery(timeout=5.0)
    async with client(member.url) as api:
        first = await reads.enablements("m", api)
        assert first == decision.aggregated_enablements([CORE, GROUPS])
        again = await reads.enablements("m", api)
        assert again is first  # both 304: the last result itself
        core_part = reads.known["m"].documents["/api"]
        member.documents = {**member.documents, "/apis": {"kind": "APIGroupDiscoveryList",
                                                          "items": []}}
        changed = await reads.enablements("m", api)
        assert changed == decision.aggregated_enablements([CORE])
        assert reads.known["m"].documents["/api"] is core_part  # the 304 was not parsed
    tags = [tag for _, tag in member.seen]
    assert tags[:2] == [None, None]
    assert all(tag and tag.startswith('"') for tag in tags[2:])
    assert len(tags) == 6


async def test_a_failed_read_a_new_client_or_no_tags_read_everything_again(
        member: TaggingMember) -> None:
    reads = discovery.Discovery(timeout=5.0)
    async with client(member.url) as api, client(member.url) as replacement:
        await reads.enablements("m", api)
        member.failing = True
        assert await reads.enablements("m", api) == ([], True)
        assert "m" not in reads.known  # no stale tags after an error
        member.failing = False
        member.seen.clear()
        found = await reads.enablements("m", api)
        assert found == decision.aggregated_enablements([CORE, GROUPS])
        assert [tag for _, tag in member.seen] == [None, None]  # read in full

        member.seen.clear()
        assert await reads.enablements("m", replacement) == found
        assert [tag for _, tag in member.seen] == [None, None]  # the pool's new client
        assert reads.known["m"].api is replacement

        member.tagged = False
        member.seen.clear()
        for _ in range(2):
            assert await reads.enablements("m", replacement) == found
        tags = [tag for _, tag in member.seen]
        assert tags[2:] == [None, None]  # the tags last sent drew untagged answers: forgotten
        assert len(tags) == 4
        assert "m" not in reads.known
        reads.forget("other")  # forgetting an unknown member is fine


async def test_a_member_that_does_not_answer_is_lost_not_partial(
        member: TaggingMember) -> None:
    """No connection, or no answer in time: :class:`discovery.Lost`, and its tags dropped.

    (An answer that is an error stays ``([], True)``: the member is there.)
    """
    reads = discovery.Discovery(timeout=0.2)
    async with client(member.url) as api, client("http://127.0.0.1:1") as refused:
        await reads.enablements("m", api)
        with pytest.raises(discovery.Lost, match="discovery: "):
            await reads.enablements("m", refused)
        assert "m" not in reads.known
        await reads.enablements("m", api)
        member.silent = True
        with pytest.raises(discovery.Lost, match=r"no answer within 0\.2s"):
            await reads.enablements("m", api)
        assert "m" not in reads.known


def crd(group: str) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"widgets.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                         "openAPIV3Schema": {"type": "object",
                                             "x-kubernetes-preserve-unknown-fields": True}}}]}}


async def test_a_real_api_server_answers_304_until_a_crd_changes_its_apis(
        env: environment.LocalEnvironment) -> None:
    group = "discovery-etag.clusterhealth.test"
    reads = discovery.Discovery(timeout=10.0)
    async with env.client("member1") as api:
        plain = [await api.request("GET", path, headers={"Accept": discovery.ACCEPT})
                 for path in discovery.PATHS]
        first = await reads.enablements("member1", api)
        assert first == decision.aggregated_enablements(plain)  # as read before this change
        assert not first[1]
        assert await reads.enablements("member1", api) is first
        core_part = reads.known["member1"].documents["/api"]
        await api.create(resources.CRDS, crd(group))
        try:
            async def served() -> tuple[list[dict[str, Any]], bool] | None:
                found = await reads.enablements("member1", api)
                return found if f"{group}/v1" in {e["groupVersion"] for e in found[0]} \
                    else None
            changed = await waiting.eventually(served, timeout=30, interval=0.2)
            assert {"name": "widgets", "kind": "Widget"} in next(
                e["resources"] for e in changed[0] if e["groupVersion"] == f"{group}/v1")
            assert reads.known["member1"].documents["/api"] is core_part  # /api: 304
            assert await reads.enablements("member1", api) is changed
        finally:
            await api.delete(resources.CRDS, f"widgets.{group}", missing_ok=True)
