"""The controller builder: requests, predicates, watches, and a built controller's wiring.

The informers here are fakes (a store, handlers, a synced flag): the builder's own logic
is pure; the controllers built with it are tested against real API servers.
"""

from __future__ import annotations

import asyncio
import pathlib
import types
from typing import Any, cast

import prometheus_client
import pytest

import testkit
from clusterhealth_core import builder, reconcile, runner
from clusterhealth_core import clock as clocks
from clusterhealth_core.kube import informer


def obj(name: str, namespace: str = "", **fields: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"metadata": {**meta, **fields.pop("metadata", {})}, **fields}


@pytest.mark.parametrize(("request_", "key"), [
    (builder.Request("ns", "a"), "ns/a"),
    (builder.Request("", "cluster-a"), "cluster-a"),
    (builder.Request("ns", "a", "Deployment.apps/v1"), "Deployment.apps/v1|ns/a"),
    (builder.Request("", "a", "Cluster"), "Cluster|a"),
])
def test_a_request_is_keyed_as_informers_key_objects(request_: builder.Request,
                                                     key: str) -> None:
    assert request_.key == key == str(request_)
    assert builder.Request.parse(key) == request_
    assert builder.Request.of(obj(request_.name, request_.namespace), request_.kind) == request_
    if not request_.kind:
        assert informer.key_of(obj(request_.name, request_.namespace)) == key


SPEC_A = obj("a", "ns", spec={"x": 1}, status={"ok": True})
STATUS_WRITE = obj("a", "ns", spec={"x": 1}, status={"ok": False})
SPEC_CHANGE = obj("a", "ns", spec={"x": 2}, status={"ok": True})


@pytest.mark.parametrize(("predicate", "event", "kept"), [
    (builder.SPEC, builder.Event("ADDED", SPEC_A, None), True),
    (builder.SPEC, builder.Event("DELETED", SPEC_A, None), True),
    (builder.SPEC, builder.Event("MODIFIED", STATUS_WRITE, SPEC_A), False),
    (builder.SPEC, builder.Event("MODIFIED", SPEC_CHANGE, SPEC_A), True),
    (builder.SPEC, builder.Event("MODIFIED", SPEC_A, None), True),  # no old: keep
    (builder.generation_changed, builder.Event(
        "MODIFIED", obj("a", metadata={"generation": 2}), obj("a", metadata={"generation": 1})),
     True),
    (builder.generation_changed, builder.Event(
        "MODIFIED", obj("a", metadata={"generation": 1}), obj("a", metadata={"generation": 1})),
     False),
    (builder.changed(builder.spec_and_deletion), builder.Event(
        "MODIFIED", obj("a", spec={}, metadata={"deletionTimestamp": "t"}), obj("a", spec={})),
     True),
    (builder.not_modified, builder.Event("MODIFIED", SPEC_CHANGE, SPEC_A), False),
    (builder.not_modified, builder.Event("ADDED", SPEC_A, None), True),
    (builder.not_deleted, builder.Event("DELETED", SPEC_A, None), False),
    (builder.not_deleted, builder.Event("MODIFIED", SPEC_CHANGE, SPEC_A), True),
])
def test_predicates(predicate: builder.Predicate, event: builder.Event, kept: bool) -> None:
    assert predicate(event) is kept


def test_a_watch_observes_every_event_and_maps_only_what_its_predicates_keep() -> None:
    seen: list[str] = []
    watch = builder.Watch(cast(informer.Informer, None), builder.to_self, (builder.SPEC,),
                          observe=lambda e: seen.append(e.type))
    assert list(watch.requests(builder.Event("MODIFIED", STATUS_WRITE, SPEC_A))) == []
    assert list(watch.requests(builder.Event("MODIFIED", SPEC_CHANGE, SPEC_A))) == [
        builder.Request("ns", "a")]
    assert seen == ["MODIFIED", "MODIFIED"]


def test_on_deleted_is_told_each_deleted_object_whatever_the_predicates() -> None:
    gone: list[builder.Request] = []
    watch = builder.Watch(cast(informer.Informer, None), builder.to_self, (builder.not_deleted,),
                          on_deleted=gone.append)
    assert list(watch.requests(builder.Event("MODIFIED", SPEC_CHANGE, SPEC_A))) == [
        builder.Request("ns", "a")]
    assert gone == []
    assert list(watch.requests(builder.Event("DELETED", SPEC_A, None))) == []
    assert gone == [builder.Request("ns", "a")]


def test_every_and_by_name_map_an_event_to_what_a_cache_or_an_index_names() -> None:
    cache = FakeInformer()
    cache.store = {"ns/a": obj("a", "ns"), "b": obj("b")}
    every = builder.every(cast(informer.Informer, cache))
    event = builder.Event("ADDED", obj("cluster-1"), None)
    assert every(event) == [builder.Request("ns", "a"), builder.Request("", "b")]
    cache.store.pop("b")  # read at each event, not when declared
    assert every(event) == [builder.Request("ns", "a")]
    index: dict[str, list[str | builder.Request]] = {
        "cluster-1": ["ns/x", builder.Request("", "y", "Kind")]}
    by_name = builder.by_name(lambda name: index.get(name, []))
    assert by_name(event) == [builder.Request("ns", "x"), builder.Request("", "y", "Kind")]
    assert by_name(builder.Event("DELETED", obj("cluster-2"), None)) == []


class FakeInformer:
    """An informer's surface as the builder uses it: handlers, a store, a synced flag."""

    def __init__(self) -> None:
        self.handlers: list[informer.Handler] = []
        self.store: dict[str, informer.Object] = {}
        self.loaded = asyncio.Event()

    def add_handler(self, handler: informer.Handler) -> None:
        self.handlers.append(handler)

    @property
    def synced(self) -> bool:
        return self.loaded.is_set()

    async def wait_synced(self) -> None:
        await self.loaded.wait()

    def emit(self, event: str, new: informer.Object, old: informer.Object | None = None) -> None:
        key = informer.key_of(new)
        if event == "DELETED":
            self.store.pop(key, None)
        else:
            self.store[key] = new
        for handler in self.handlers:
            handler(event, new, old)


def term() -> runner.Term:
    metrics = types.SimpleNamespace(
        controllers=reconcile.ControllerMetrics(prometheus_client.CollectorRegistry()))
    return cast(runner.Term, types.SimpleNamespace(clock=clocks.Clock(), metrics=metrics,
                                                   api=None, recorder=None, writes=True,
                                                   informers=None))


@testkit.fake_time  # the fakes and the runtime wait only on the loop's clock
async def test_a_built_controller_reconciles_requests_from_for_owns_and_watches() -> None:
    primary, owned, other, read = FakeInformer(), FakeInformer(), FakeInformer(), FakeInformer()
    done: list[builder.Request] = []
    reconciled = asyncio.Event()

    async def reconcile_one(request: builder.Request) -> reconcile.Result | None:
        done.append(request)
        reconciled.set()
        return None

    def owner(o: informer.Object) -> builder.Request | None:
        parent = (o["metadata"].get("labels") or {}).get("parent")
        return None if parent is None else builder.Request("ns", parent)

    built = (builder.Builder("test", term(), workers=1)
             .for_(cast(informer.Informer, primary), builder.SPEC)
             .owns(cast(informer.Informer, owned), owner)
             .watches(cast(informer.Informer, other),
                      lambda e: [builder.Request.parse(k) for k in sorted(primary.store)],
                      builder.not_modified)
             .uses(cast(informer.Informer, read))
             .complete(reconcile_one))
    def synced() -> bool:  # read again each time (mypy would narrow the property)
        return built.synced

    assert len(built.informers) == 4 and not synced()
    task = asyncio.create_task(built.run())
    try:
        for cache in (primary, owned, other):
            cache.loaded.set()
        await asyncio.sleep(0.01)
        assert not synced() and not done  # the read-only cache holds the start
        read.loaded.set()
        assert synced()

        async def next_request() -> builder.Request:
            async with asyncio.timeout(5):
                await reconciled.wait()
            reconciled.clear()
            return done.pop()

        primary.emit("ADDED", obj("a", "ns", spec={"x": 1}))
        assert await next_request() == builder.Request("ns", "a")
        primary.emit("MODIFIED", STATUS_WRITE, SPEC_A)  # dropped by the predicate
        owned.emit("ADDED", obj("w", "es", metadata={"labels": {"parent": "b"}}))
        assert await next_request() == builder.Request("ns", "b")
        owned.emit("ADDED", obj("orphan", "es"))  # no owner: nothing
        other.emit("MODIFIED", obj("c"), obj("c"))  # dropped: not_modified
        other.emit("ADDED", obj("c"))
        assert await next_request() == builder.Request("ns", "a")
        await asyncio.sleep(0.05)
        assert done == []
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@testkit.fake_time  # the fakes and the runtime wait only on the loop's clock
async def test_resync_queues_every_object_of_the_for_kind_each_period() -> None:
    primary = FakeInformer()
    primary.store = {"ns/a": obj("a", "ns"), "b": obj("b")}
    primary.loaded.set()
    done: list[builder.Request] = []

    async def reconcile_one(request: builder.Request) -> None:
        done.append(request)

    built = (builder.Builder("resync", term()).for_(cast(informer.Informer, primary))
             .resync(0.02).complete(reconcile_one))
    task = asyncio.create_task(built.run())
    try:
        async with asyncio.timeout(5):
            while len(done) < 4:
                await asyncio.sleep(0.01)
        assert set(done) == {builder.Request("ns", "a"), builder.Request("", "b")}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)



@testkit.fake_time
async def test_resync_awaits_its_before_step_each_period_before_the_requests() -> None:
    primary = FakeInformer()
    primary.store = {"a": obj("a")}
    primary.loaded.set()
    seen: list[str] = []

    async def before() -> None:
        await asyncio.sleep(0.01)  # the requests wait for it
        seen.append("before")

    async def reconcile_one(request: builder.Request) -> None:
        seen.append(request.name)

    built = (builder.Builder("resync", term()).for_(cast(informer.Informer, primary))
             .resync(0.05, before=before).complete(reconcile_one))
    task = asyncio.create_task(built.run())
    try:
        async with asyncio.timeout(5):
            while len(seen) < 4:
                await asyncio.sleep(0.01)
        assert seen[:4] == ["before", "a", "before", "a"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

def test_a_controller_that_watches_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="watches nothing"):
        builder.Builder("empty", term()).complete(lambda r: asyncio.sleep(0))


class FakeFactory:
    """``term.informers``: one fake informer per resource."""

    def __init__(self) -> None:
        self.made: dict[str, FakeInformer] = {}

    def informer(self, resource: Any) -> FakeInformer:
        return self.made.setdefault(resource.plural, FakeInformer())


class FakeApi:
    def __init__(self) -> None:
        self.applied: list[dict[str, Any]] = []

    async def apply(self, resource: Any, body: dict[str, Any], *, field_manager: str) -> None:
        self.applied.append(body)


@testkit.fake_time  # the fakes and the runtime wait only on the loop's clock
async def test_the_controller_docs_core_md_declares_runs_as_written() -> None:
    text = (pathlib.Path(__file__).parents[2] / "docs" / "core.md").read_text()
    source = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert len(source.splitlines()) < 40
    module = types.ModuleType("docs_example")
    exec(compile(source, "docs/core.md", "exec"), module.__dict__)
    factory, api, fake = FakeFactory(), FakeApi(), term()
    fake_term = cast(runner.Term, types.SimpleNamespace(
        api=api, informers=factory, clock=fake.clock, metrics=fake.metrics, recorder=None,
        writes=True))
    made = module.MembersConfigMap(fake_term)
    for cache in factory.made.values():
        cache.loaded.set()
    task = asyncio.create_task(made.run())
    try:
        factory.made["clusters"].emit("ADDED", obj("member1"))
        factory.made["namespaces"].emit("ADDED", obj("team-a"))
        async with asyncio.timeout(5):
            while not api.applied:
                await asyncio.sleep(0.01)
        assert api.applied[-1]["metadata"] == {"name": "members", "namespace": "team-a"}
        assert api.applied[-1]["data"] == {"clusters": "member1"}
        assert made.synced
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@testkit.fake_time  # the fakes and the runtime wait only on the loop's clock
async def test_start_hooks_status_writers_channels_and_delayed_watches() -> None:
    """Writers before the caches, ``on_start`` after them, workers after ``start_after``."""
    policies = FakeInformer()
    steps: list[str] = []
    done: list[builder.Request] = []
    gate = asyncio.Event()

    async def status_writer(resource: Any, manager: str, fields: Any, conditions: Any,
                            nested: Any) -> str:
        steps.append(f"writer {resource.plural} {manager} {sorted(nested)}")
        return f"writer of {manager}"

    fake = term()
    fake_term = cast(runner.Term, types.SimpleNamespace(
        clock=fake.clock, metrics=fake.metrics, informers=None, status_writer=status_writer,
        api=None, recorder=None, writes=True))

    async def reconcile_one(request: builder.Request) -> None:
        done.append(request)

    async def opened() -> None:
        await gate.wait()
        steps.append("workers")

    resource = types.SimpleNamespace(plural="things")
    built = (builder.Builder("hooks", fake_term)
             .for_(cast(informer.Informer, policies), delay=0.05)
             .status(cast(Any, resource), "a", frozenset({"conditions"}))
             .status(cast(Any, resource), "b", frozenset({"conditions"}),
                     nested={"x.y": frozenset({"z"})})
             .on_start(lambda: steps.append("on_start"))
             .start_after(opened)
             .complete(reconcile_one))
    fed = builder.Builder("fed", fake_term).channel().complete(reconcile_one)

    class Both(builder.Declared):
        controllers = (built, fed)

    both = Both(fake_term)
    task = asyncio.create_task(both.run())
    try:
        await asyncio.sleep(0.02)
        assert steps == ["writer things a []", "writer things b ['x.y']"]  # caches not loaded
        assert built.writer(cast(Any, resource), "b") == "writer of b"
        policies.loaded.set()
        await asyncio.sleep(0.02)
        assert steps[-1] == "on_start" and both.synced
        policies.emit("ADDED", obj("p", "ns"))
        fed.enqueue(builder.Request("", "x", "Kind"))
        await asyncio.sleep(0.02)
        assert done == [builder.Request("", "x", "Kind")]  # the delayed one waits, gated
        gate.set()
        async with asyncio.timeout(5):
            while len(done) < 2:
                await asyncio.sleep(0.01)
        assert done[1] == builder.Request("ns", "p") and steps[-1] == "workers"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    with pytest.raises(RuntimeError, match="no status writer"):
        fed.writer(cast(Any, resource))


@testkit.fake_time  # the fakes and the runtime wait only on the loop's clock
async def test_first_pass_beside_on_stop_and_synced_after_start() -> None:
    """A second controller starts after the first pass of the first; work beside; on_stop."""
    clusters, statuses = FakeInformer(), FakeInformer()
    steps: list[str] = []
    gate = asyncio.Event()
    opened = asyncio.Event()

    async def reconcile_cluster(request: builder.Request) -> None:
        if request.name == "b":
            await gate.wait()
            raise RuntimeError("failed: attempted all the same")
        if request.name == "c":
            await asyncio.Event().wait()  # only its deletion ends its first pass
        steps.append(f"cluster {request.name}")

    async def reconcile_status(request: builder.Request) -> None:
        steps.append(f"status {request.name}")

    async def housekeeping() -> None:
        steps.append("beside")
        await asyncio.Event().wait()

    async def closed() -> None:
        steps.append("closed")

    async def started() -> None:
        await opened.wait()

    fake = term()
    first = builder.Builder("first", fake).for_(cast(informer.Informer, clusters)).complete(
        reconcile_cluster)
    second = (builder.Builder("second", fake)
              .for_(cast(informer.Informer, statuses))
              .start_after_first_pass(first, timeout=60)
              .beside(housekeeping)
              .on_stop(lambda: steps.append("stopped"))
              .on_stop(closed)
              .complete(reconcile_status))
    gated = builder.Builder("gated", fake).for_(cast(informer.Informer, statuses)).start_after(
        started, synced=True).complete(reconcile_status)

    for name in ("a", "b", "c"):
        clusters.emit("ADDED", obj(name))

    class Both(builder.Declared):
        controllers = (first, second, gated)

    both = Both(fake)
    task = asyncio.create_task(both.run())
    try:
        await asyncio.sleep(0.02)
        assert steps == ["beside"]  # beside from the start, before the caches load
        clusters.loaded.set()
        statuses.loaded.set()
        statuses.emit("ADDED", obj("r"))
        await asyncio.sleep(0.5)
        assert first.first_pass is not None and first.first_pass.pending == {"b", "c"}
        clusters.emit("DELETED", obj("c"))  # deleted: done
        assert "status r" not in steps and first.synced and second.synced
        assert not gated.synced and not both.synced  # its start_after has not returned
        gate.set()  # b fails: attempted, the first pass is over
        async with asyncio.timeout(5):
            while "status r" not in steps:
                await asyncio.sleep(0.01)
        assert "cluster a" in steps
        opened.set()
        async with asyncio.timeout(5):
            while not both.synced:
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert steps[-2:] == ["stopped", "closed"]


@testkit.fake_time
async def test_a_first_pass_that_never_ends_holds_the_workers_until_the_timeout(
        caplog: pytest.LogCaptureFixture) -> None:
    clusters = FakeInformer()
    hold = asyncio.Event()

    async def never(request: builder.Request) -> None:
        await hold.wait()

    fake = term()
    first = builder.Builder("first", fake).for_(cast(informer.Informer, clusters)).complete(never)
    waiting = first.follow_first_pass()
    clusters.emit("ADDED", obj("a"))
    clusters.loaded.set()
    task = asyncio.create_task(first.run())
    try:
        await waiting.wait(30)
        assert not waiting.over.is_set() and waiting.pending == {"a"}
        assert "first: 1 object(s) not reconciled after 30s" in caplog.text
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@testkit.fake_time  # the runtime's clock is the loop's
async def test_a_tuple_of_sources_is_watched_alike_and_a_tuple_of_resources_gets_one_writer_each(
) -> None:
    """``watches((a, b), ...)`` is ``watches(a, ...).watches(b, ...)``; ``status`` likewise."""
    first, second = FakeInformer(), FakeInformer()
    things = types.SimpleNamespace(plural="things")
    others = types.SimpleNamespace(plural="others")

    async def reconcile_one(request: builder.Request) -> None:
        return None

    built = (builder.Builder("pair", term())
             .for_((cast(informer.Informer, first), cast(informer.Informer, second)),
                   builder.SPEC)
             .status((cast(Any, things), cast(Any, others)), "m", frozenset({"conditions"}))
             .complete(reconcile_one))
    assert [w.informer for w in built.watches] == [first, second]
    assert all(w.predicates == (builder.SPEC,) for w in built.watches)
    assert [(s.resource, s.field_manager) for s in built.starting.statuses] == [
        (things, "m"), (others, "m")]
    second.emit("ADDED", obj("b"))
    first.emit("ADDED", obj("a"))
    assert len(built.queue) == 2


def test_parsed_keeps_each_object_parsed_once_per_change_and_drops_the_deleted() -> None:
    calls: list[str] = []

    def parse(o: informer.Object) -> int | None:
        calls.append(o["metadata"]["name"])
        return o.get("spec", {}).get("x")  # type: ignore[no-any-return]

    parsed = builder.Parsed(parse)
    parsed.observe(builder.Event("ADDED", obj("a", "ns", spec={"x": 1}), None))
    parsed.observe(builder.Event("ADDED", obj("b", "ns"), None))  # not usable: None
    assert parsed.get(builder.Request("ns", "a")) == 1 and parsed.values() == [1]
    assert parsed.get(builder.Request("ns", "b")) is None
    parsed.observe(builder.Event("MODIFIED", obj("b", "ns", spec={"x": 2}), None))
    assert parsed.values() == [1, 2] and calls == ["a", "b", "b"]
    parsed.observe(builder.Event("DELETED", obj("a", "ns", spec={"x": 1}), None))
    assert parsed.values() == [2] and parsed.get(builder.Request("ns", "a")) is None
    assert calls == ["a", "b", "b"]  # a deletion is not parsed


def _binding(name: str, *clusters: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"},
            "spec": {"clusters": [{"name": c} for c in clusters]}}


def test_an_index_follows_what_each_object_points_at_and_its_deletion() -> None:
    index = builder.Index(
        builder.Request.of, lambda b: [c["name"] for c in b["spec"]["clusters"]])
    a, b = builder.Request("ns", "a"), builder.Request("ns", "b")
    index.observe(builder.Event("ADDED", _binding("a", "m1", "m2"), None))
    index.observe(builder.Event("ADDED", _binding("b", "m2"), None))
    assert (index.on("m1"), index.on("m2"), index.on("m3")) == ({a}, {a, b}, set())
    index.observe(builder.Event("MODIFIED", _binding("a", "m3"), _binding("a", "m1", "m2")))
    assert (index.on("m1"), index.on("m2"), index.on("m3")) == (set(), {b}, {a})
    assert index.of(a) == {"m3"}
    index.observe(builder.Event("DELETED", _binding("b", "m2"), None))
    assert index.on("m2") == set() and index.of(b) == frozenset()
