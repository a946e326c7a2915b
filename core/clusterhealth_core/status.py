"""Status writes that never overwrite another writer's fields.

Several writers share one ``Cluster.status``: the cluster-status controller
(``Ready``), the agent (``ServiceDomainNameResolutionReady`` and other probe
conditions) and the remedy controller (``remedyActions``).  Each writes with
server-side apply under its own field manager; the CRD declares
``status.conditions`` a list-map keyed by ``type``, so the API server merges
condition by condition and a writer owns exactly the entries it applies.
(Karmada's status controller once erased ``remedyActions`` by writing the
whole status: its PR 5030.)
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import prometheus_client

from clusterhealth_core import clock as clocks
from clusterhealth_core import schema
from clusterhealth_core.api import meta
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources

log = logging.getLogger(__name__)
CONFLICT_ATTEMPTS = 10
"""Read-modify-writes retried on 409 (others write the same object too)."""
CONFLICT_PAUSE = 0.01
"""The first pause after a 409; it doubles (half jittered) up to ``CONFLICT_PAUSE_MAX``.

A fixed, short pause lets a writer in a tight loop starve another: the one that
loses keeps re-reading just before the winner's next write.  Doubling gives
the loser a window (about 4 s over all attempts at most)."""
CONFLICT_PAUSE_MAX = 1.0
UNSEEN_HORIZON = 60.0
"""Seconds after which a status write is taken as seen by the writer's informer."""


def live_conditions(obj: Mapping[str, Any]) -> tuple[meta.Condition, ...]:
    """The conditions of a live object (entries that do not parse are skipped)."""
    parsed: list[meta.Condition] = []
    for raw in (obj.get("status") or {}).get("conditions") or []:
        try:
            parsed.append(meta.Condition.from_dict(raw))
        except meta.ValidationError:
            continue
    return tuple(parsed)


def keep_transition_times(
    live: Iterable[meta.Condition], desired: Sequence[meta.Condition]
) -> list[meta.Condition]:
    """``desired``, keeping ``live``'s ``lastTransitionTime`` where the status is unchanged."""
    current = tuple(live)
    result = []
    for condition in desired:
        merged = meta.set_condition(current, condition)
        found = meta.find_condition(merged, condition.type)
        assert found is not None
        result.append(found)
    return result


async def apply_status(
    api: kube.ApiClient,
    resource: resources.Resource,
    name: str,
    status: Mapping[str, Any],
    *,
    field_manager: str,
    namespace: str | None = None,
) -> dict[str, Any]:
    """Server-side apply ``status`` (the fields this manager owns) to the status subresource."""
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return await api.apply(
        resource, {"metadata": metadata, "status": dict(status)},
        field_manager=field_manager, subresource="status",
    )


async def apply_conditions(
    api: kube.ApiClient,
    resource: resources.Resource,
    name: str,
    conditions: Sequence[meta.Condition],
    *,
    field_manager: str,
    namespace: str | None = None,
) -> dict[str, Any]:
    """Apply this writer's conditions; the others' conditions are left alone."""
    return await apply_status(
        api, resource, name, {"conditions": [c.to_dict() for c in conditions]},
        field_manager=field_manager, namespace=namespace,
    )


class StatusNotServed(errors.KubeError):
    """The server answered 404 to a status write although the object exists."""


class SchemaMetrics:
    """``clusterhealth_schema_unsupported_field{resource,field}``: what a server cannot hold."""

    def __init__(self, registry: prometheus_client.CollectorRegistry) -> None:
        self.unsupported = prometheus_client.Gauge(
            "clusterhealth_schema_unsupported_field",
            "1 for each status field this component would write that the server's schema "
            "does not declare (left out of every write).",
            ["resource", "field"], registry=registry)


@dataclasses.dataclass
class StatusWriter:
    """One writer's status fields on one kind, written the way that server supports.

    * Fields the server's schema does not declare are left out of every write
      (said once, at construction, in the log and in ``metrics``); so is a
      :attr:`nested` field the server does not declare, or whose items require
      a field this writer does not write (no valid value of it can be written).
    * ``status.conditions`` declared a list-map: server-side apply, as
      :func:`apply_status` (the server merges by ``type``).  An atomic list
      (Karmada's Cluster API), or no published schema: read-modify-write of the
      conditions guarded by ``resourceVersion``, retried on conflict, keeping
      every other writer's conditions, as Karmada's own controllers do (an
      update recorded under :attr:`field_manager`, not the client's name).
    * No status subresource: the status is written through the main resource.
    * No ``status`` in the schema at all: :attr:`writable` is False.
    """

    api: kube.ApiClient
    kind: schema.Kind
    field_manager: str
    fields: frozenset[str]
    """The top-level status fields this writer owns (``conditions`` included if it writes some)."""
    condition_types: frozenset[str] = frozenset()
    """The condition types this writer owns (others' are never touched)."""
    metrics: SchemaMetrics | None = None
    nested: Mapping[str, frozenset[str]] = dataclasses.field(default_factory=dict)
    """Nested fields this writer writes, by dotted path under ``status`` (lists crossed:
    ``loadBalancer.ingress.ports``), to the fields it writes in each of their items."""

    def __post_init__(self) -> None:
        self.writable = self.kind.declares("status")
        wanted = sorted(self.fields) if self.writable else ["status"]
        self.unsupported = frozenset(
            self.kind.undeclared_status_fields(wanted) if self.writable else ["status"])
        for field in sorted(self.unsupported):
            log.warning("%s does not declare status.%s on this server: %s leaves it out of "
                        "every write", self.kind.resource.crd_name,
                        field if field != "status" else "(status)", self.field_manager)
            if self.metrics is not None:
                self.metrics.unsupported.labels(self.kind.resource.crd_name, field).set(1)
        refused = {path: _refusal(self.kind, path, written)
                   for path, written in sorted(self.nested.items()) if self.writable}
        self.unsupported_nested = tuple(path for path, why in refused.items() if why)
        """The :attr:`nested` fields left out of every write."""
        for path in self.unsupported_nested:
            log.warning("%s %s on this server: %s leaves it out of every write",
                        self.kind.resource.crd_name, refused[path], self.field_manager)
            if self.metrics is not None:
                self.metrics.unsupported.labels(self.kind.resource.crd_name, path).set(1)
        self.merge_conditions = "conditions" in self.fields and self.kind.list_type(
            "status", "conditions") != "map"
        node = self.kind.node("status") if self.kind.known else None
        self.status_nullable = bool(node and node.get("nullable"))

    def supported(self, status: Mapping[str, Any]) -> dict[str, Any]:
        """``status`` without the fields the server does not declare (nor take, nested)."""
        kept: dict[str, Any] = {k: v for k, v in status.items() if k not in self.unsupported}
        for path in self.unsupported_nested:
            kept = _without(kept, path.split("."))
        return kept

    @property
    def _subresource(self) -> str | None:
        return "status" if self.kind.status_subresource else None

    async def write(self, name: str, status: Mapping[str, Any], *,
                    namespace: str | None = None,
                    cached: Mapping[str, Any] | None = None,
                    reread: bool = True) -> dict[str, Any] | None:
        """Make this writer's fields equal ``status`` (absent ones removed).

        ``cached``: the object as an informer holds it (whole, not transformed).
        Where the write reads, modifies and writes (atomic conditions, as on
        Karmada's CRDs), it starts from that object instead of a ``GET``, as
        client-go's controllers do; a stale one costs a Conflict, then a read.
        Only used with a status subresource (the write then carries nothing else).
        ``reread`` False: a stale ``cached`` raises the :class:`~errors.Conflict`
        instead, for a caller that would rather try again from its informer once
        the other write's event has reached it (a controller-runtime controller
        reads its cache again the same way) than read the server.

        Returns the object as written, or None when nothing is writable here.
        """
        if not self.writable:
            return None
        wanted = self.supported(status)
        try:
            # An apply that gives up every field can leave ``status: null``, which a
            # schema without ``nullable`` rejects: such removals are read-modify-writes.
            if self.merge_conditions or (not wanted and not self.status_nullable):
                return await self._read_modify_write(
                    name, wanted, namespace, cached if self._subresource else None, reread)
            metadata: dict[str, Any] = {"name": name}
            if namespace is not None:
                metadata["namespace"] = namespace
            return await self.api.apply(
                self.kind.resource, {"metadata": metadata, "status": wanted},
                field_manager=self.field_manager, subresource=self._subresource)
        except errors.NotFound as exc:
            await self._explain_not_found(name, namespace, exc)
            raise

    async def merge(self, name: str, status: Mapping[str, Any], *,
                    namespace: str | None = None,
                    resource_version: str | None = None) -> dict[str, Any] | None:
        """Make this writer's fields equal ``status`` with one JSON merge patch.

        Every field of :attr:`fields` the server declares is sent: the values
        of ``status``, ``null`` for the absent ones (which removes them,
        whoever wrote them).  The server records the field manager as the
        owner of what it set (an ``Update`` operation, as Karmada's
        controllers write), taking those fields from every other manager.
        Cheaper for the API server than :meth:`write`'s server-side apply
        (decision 0008).  Not for writers of conditions (they share a list
        with other writers: :meth:`write`).

        With ``resource_version`` the patch applies only to that version of the
        object (409 :class:`~errors.Conflict` otherwise).

        Returns the object as written, or None when nothing is writable here.
        """
        if "conditions" in self.fields:
            raise ValueError(f"{self.field_manager}: a merge patch would replace every "
                             "writer's conditions; use write()")
        if not self.writable:
            return None
        wanted = self.supported(status)
        body: dict[str, Any] = {"status": {
            field: wanted[field] if wanted.get(field) not in (None, [], {}) else None
            for field in sorted(self.fields - self.unsupported)}}
        if resource_version is not None:
            body["metadata"] = {"resourceVersion": resource_version}
        try:
            return await self.api.patch(
                self.kind.resource, name, body, namespace=namespace,
                subresource=self._subresource, patch_type="merge",
                field_manager=self.field_manager)
        except errors.NotFound as exc:
            await self._explain_not_found(name, namespace, exc)
            raise

    async def update(self, name: str, status: Mapping[str, Any], *,
                     cached: Mapping[str, Any], namespace: str | None = None,
                     reread: bool = True) -> dict[str, Any] | None:
        """Make this writer's fields equal ``status`` with an update (PUT) of the whole object.

        ``cached``: the whole object as an informer holds it (untransformed;
        ``metadata.managedFields`` may be left out: the server then keeps its
        own).  The body is that object with this writer's fields set in its
        status, guarded by its ``resourceVersion``: a newer object makes it a
        409 :class:`~errors.Conflict`, then (``reread``) one read of the
        server and another try, so no other writer's field is ever lost.
        The body carries the spec and metadata as read, because not every
        server ignores them on a status update: a CRD's status subresource
        does, Karmada's aggregated Cluster API stores them as sent (its status
        strategy keeps nothing of the old object), so a body without a spec
        would erase the Cluster's spec.  The server records an ``Update`` of
        the field manager for what it changed, as Karmada's controllers
        write.  One write alone costs the API server less than
        :meth:`merge`'s patch (decision 0010).  Without a status subresource
        it is :meth:`merge`.

        Returns the object as written (when nothing changed: ``cached``,
        nothing written), or None when nothing is writable here.
        """
        if not self.writable:
            return None
        if not self._subresource:
            return await self.merge(name, status, namespace=namespace)
        if not (cached.get("metadata") or {}).get("resourceVersion"):
            raise ValueError(f"{self.field_manager}: an update of {name} needs the whole "
                             "object as read, with its resourceVersion")
        try:
            return await self._read_modify_write(name, self.supported(status), namespace,
                                                 cached, reread)
        except errors.NotFound as exc:
            await self._explain_not_found(name, namespace, exc)
            raise

    async def _explain_not_found(self, name: str, namespace: str | None,
                                 exc: errors.NotFound) -> None:
        try:
            await self.api.get(self.kind.resource, name, namespace=namespace)
        except errors.NotFound:
            return  # really gone: the caller's NotFound is right
        raise StatusNotServed(
            f"{self.kind.resource.crd_name} {name} exists but the status write got 404 "
            f"({exc}): the server does not serve its status this way") from exc

    async def _read_modify_write(self, name: str, wanted: Mapping[str, Any],
                                 namespace: str | None,
                                 cached: Mapping[str, Any] | None = None,
                                 reread: bool = True) -> dict[str, Any]:
        last: errors.Conflict | None = None
        for attempt in range(CONFLICT_ATTEMPTS):
            live = ({**cached, "apiVersion": self.kind.resource.api_version,  # items of a
                     "kind": self.kind.resource.kind}  # list lack them
                    if attempt == 0 and cached is not None
                    else await self.api.get(self.kind.resource, name, namespace=namespace))
            current = dict(live.get("status") or {})
            mine = self.condition_types | {str(c.get("type"))
                                           for c in wanted.get("conditions") or []}
            updated = merged_status(current, wanted, self.fields - self.unsupported, mine)
            if updated == current:
                return live
            try:
                return await self.api.update(self.kind.resource, {**live, "status": updated},
                                             subresource=self._subresource,
                                             field_manager=self.field_manager)
            except errors.Conflict as exc:
                last = exc
                if attempt == 0 and cached is not None:
                    if not reread:
                        raise
                    continue  # the cache was behind: read the server now
                pause = min(CONFLICT_PAUSE_MAX, CONFLICT_PAUSE * 2 ** attempt)
                await asyncio.sleep(random.uniform(pause / 2, pause))
        assert last is not None
        raise last


class LostRaces:
    """Where a status write that lost a race starts again: the cache, then the server.

    A write from an informer's copy that meets a newer object (409) is not read
    from the server at once: the caller tries again shortly from its informer,
    which by then usually holds the other write (as a controller-runtime
    controller reconciles again from its cache).  Only a try that would start
    from the very copy that lost, the informer not having moved, reads the
    server.  Keyed by any hashable name of the object; one per controller.
    """

    def __init__(self) -> None:
        self._lost: dict[object, str | None] = {}
        """The ``resourceVersion`` a write started from when it lost, by key."""

    def reread(self, key: object, cached: Mapping[str, Any] | None) -> bool:
        """Whether a write of ``key`` from ``cached`` must read the server first."""
        if cached is None:
            return True
        return key in self._lost and self._lost[key] == _version(cached)

    def lost(self, key: object, cached: Mapping[str, Any] | None) -> None:
        """The next write of ``key`` from ``cached`` (the informer unmoved) reads the server."""
        self._lost[key] = _version(cached)

    def forget(self, key: object) -> None:
        """``key`` was written, or is gone."""
        self._lost.pop(key, None)

    async def write(self, writer: StatusWriter, key: object, name: str,
                    status: Mapping[str, Any], *, namespace: str | None,
                    cached: Mapping[str, Any] | None, update: bool = False) -> Won | None:
        """``writer.write`` from ``cached``; None: it lost the race, try again from the cache.

        ``update``: :meth:`StatusWriter.update` instead (``cached`` then is the
        whole object).  A write that read the server and lost all the same raises
        its :class:`~errors.Conflict` (the caller backs off); NotFound is raised too.
        """
        reread = self.reread(key, cached)
        try:
            if update and cached is not None:
                written = await writer.update(name, status, namespace=namespace, cached=cached,
                                              reread=reread)
            else:
                written = await writer.write(name, status, namespace=namespace, cached=cached,
                                             reread=reread)
        except errors.Conflict:
            if reread:
                raise
            self.lost(key, cached)
            return None
        except errors.NotFound:
            self.forget(key)
            raise
        self.forget(key)
        return Won(written)


@dataclasses.dataclass(frozen=True)
class Won:
    """A status write that did not lose its race (:meth:`LostRaces.write`)."""

    written: dict[str, Any] | None
    """The object as the server answered, or None (nothing writable, or already gone)."""


class UnseenWrites:
    """What a controller last wrote to each object's status, until its informer shows it.

    A controller that skips a write because its informer's copy already holds
    the wanted status can skip the wrong one, when that copy has not caught up
    with the controller's own last write: the status went A -> B (written) ->
    A again; the second A, compared with a copy still showing A, looks written
    already; then B reaches the copy and stays, because nothing queues the
    object again (a controller's own status writes are not its triggers).  So
    until the informer holds the write, the wanted status is compared with what
    was written.  The informer holds it once its copy's ``resourceVersion`` is
    at least the write's (the API server's versions are etcd's revisions:
    numbers that only grow), or, where a version is not a number, once the copy
    shows every field written.  Keyed by any hashable name of the object; one
    per controller.

    A write is also taken as seen ``horizon`` seconds after it was made: an
    informer delivers its events within seconds, and an object that is never
    looked at again (deleted, its deletion not queued) must not be remembered
    for ever.
    """

    def __init__(self, clock: clocks.Clock, *, horizon: float = UNSEEN_HORIZON) -> None:
        self.clock = clock
        self.horizon = horizon
        self._written: dict[object, tuple[float, int | None, dict[str, Any]]] = {}
        """By key, oldest write first: when written, its version, the fields as written."""

    def status(self, key: object, cached: Mapping[str, Any]) -> dict[str, Any]:
        """The status to compare a wanted one with: ``cached``'s, or the last write over it."""
        current = dict(cached.get("status") or {})
        self._expire()
        entry = self._written.get(key)
        if entry is None:
            return current
        _, version, fields = entry
        cached_version = _number(_version(cached))
        if (cached_version >= version if version is not None and cached_version is not None
                else all(current.get(field) == value for field, value in fields.items())):
            del self._written[key]  # the informer holds the write: it is current again
            return current
        return {**current, **fields}

    def wrote(self, key: object, fields: Mapping[str, Any],
              written: Mapping[str, Any] | None) -> None:
        """``fields`` were written to ``key``'s status; ``written``: the server's answer.

        The answer's values of those fields are kept (what the informer will show:
        another writer's conditions merged in, a field the schema prunes left out);
        without an answer, ``fields`` as sent.
        """
        answer = None if written is None else written.get("status")
        shown = dict(fields) if answer is None else {field: answer.get(field) for field in fields}
        self._written.pop(key, None)  # to the end: the dict stays ordered by time
        self._written[key] = (self.clock.monotonic(), _number(_version(written)), shown)
        self._expire()

    def forget(self, key: object) -> None:
        """``key`` is gone."""
        self._written.pop(key, None)

    def __len__(self) -> int:
        return len(self._written)

    def _expire(self) -> None:
        oldest = self.clock.monotonic() - self.horizon
        while self._written:
            key, (when, _, _) = next(iter(self._written.items()))
            if when > oldest:
                return
            del self._written[key]


def _number(version: str | None) -> int | None:
    return int(version) if version is not None and version.isdigit() else None


def _version(obj: Mapping[str, Any] | None) -> str | None:
    value = ((obj or {}).get("metadata") or {}).get("resourceVersion")
    return None if value is None else str(value)


def _refusal(kind: schema.Kind, path: str, written: frozenset[str]) -> str:
    """Why the server cannot take ``status.<path>`` written with ``written`` ("": it can)."""
    steps = ["status"]
    for name in path.split("."):
        steps.append(name)
        node = kind.node(*steps)
        if node is None:
            return f"does not declare status.{path}"
        if node.get("type") == "array":
            steps.append("[]")
    node = kind.node(*steps)
    if node is None:
        return f"does not declare status.{path}"
    missing = sorted(set(node.get("required") or ()) - written)
    return f"requires {', '.join(missing)} on every status.{path} entry" if missing else ""


def _without(value: Any, path: Sequence[str]) -> Any:
    """``value`` without the field at ``path`` (lists crossed); copies only what it changes."""
    if isinstance(value, list):
        return [_without(item, path) for item in value]
    if not isinstance(value, Mapping) or path[0] not in value:
        return value
    if len(path) == 1:
        return {k: v for k, v in value.items() if k != path[0]}
    return {**value, path[0]: _without(value[path[0]], path[1:])}


def merged_status(current: Mapping[str, Any], wanted: Mapping[str, Any],
                  fields: Iterable[str], condition_types: Iterable[str]) -> dict[str, Any]:
    """``current`` with this writer's ``fields`` set from ``wanted`` (absent ones removed).

    Conditions are merged by type: entries of ``condition_types`` are replaced
    in place by ``wanted``'s (or dropped when ``wanted`` lacks them), new ones
    are appended, every other writer's entry stays where it was.
    """
    result = dict(current)
    owned_types = set(condition_types)
    for field in fields:
        if field == "conditions":
            continue
        if field in wanted and wanted[field] not in (None, [], {}):
            result[field] = wanted[field]
        else:
            result.pop(field, None)
    if "conditions" in fields:
        desired = {str(c["type"]): c for c in wanted.get("conditions") or []}
        kept: list[Any] = []
        for entry in current.get("conditions") or []:
            ctype = str(entry.get("type"))
            if ctype in desired:
                kept.append(desired.pop(ctype))
            elif ctype not in owned_types:
                kept.append(entry)
        kept += list(desired.values())
        if kept:
            result["conditions"] = kept
        else:
            result.pop("conditions", None)
    return result
