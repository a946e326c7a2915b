"""Object metadata and status conditions shared by every kind.

Several writers (cluster-status controller, detection agent, remedy controller)
update conditions on the same object.  The helpers here keep
``lastTransitionTime`` honest (it moves only when the status flips), which is
what failover and flap-damping decisions are timed from, and format times the
way ``metav1.Time`` does (RFC 3339, UTC, whole seconds).

Condition messages are bounded (:func:`join_limited`, :func:`bound_message`):
the API server rejects a whole status write (422) when one message exceeds
:data:`MAX_CONDITION_MESSAGE` characters, so a list of names that grows with
the user's input (3,000 unknown clusters) must never go into a message whole.
"""

import dataclasses
import datetime
import enum
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from clusterhealth_core import text
from clusterhealth_core.api import wire
from clusterhealth_core.kube import resources

ValidationError = wire.ValidationError
"""Raised by every ``from_dict``; its message starts with the field path."""

CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
"""metav1.Condition ``type``: an optionally prefixed CamelCase name."""

CONDITION_REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
"""metav1.Condition ``reason``: a CamelCase word."""

MAX_CONDITION_MESSAGE = text.MAX_CONDITION_MESSAGE
MESSAGE_BUDGET = text.MESSAGE_BUDGET
ELLIPSIS = text.ELLIPSIS
join_limited = text.join_limited
bound_message = text.bound_message


def parse_time(value: str) -> datetime.datetime:
    """Parse an RFC 3339 timestamp into an aware UTC datetime (whole seconds)."""
    return wire.parse_time(value)


def format_time(value: datetime.datetime) -> str:
    """Format an aware datetime as ``YYYY-MM-DDTHH:MM:SSZ`` in UTC."""
    return wire.format_time(value)


def now() -> datetime.datetime:
    """The current time in UTC truncated to whole seconds, as stored on the wire."""
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0)


class ConditionStatus(enum.StrEnum):
    """metav1.ConditionStatus."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Condition(wire.Model):
    """metav1.Condition: one aspect of an object's current state."""

    type: str = dataclasses.field(
        metadata=wire.json("type", pattern=CONDITION_TYPE_PATTERN, max_length=316)
    )
    status: ConditionStatus = dataclasses.field(metadata=wire.json("status"))
    observed_generation: int | None = dataclasses.field(
        default=None, metadata=wire.json("observedGeneration", fmt="int64", minimum=0)
    )
    last_transition_time: datetime.datetime = dataclasses.field(
        metadata=wire.json("lastTransitionTime")
    )
    reason: str = dataclasses.field(
        metadata=wire.json(
            "reason", pattern=CONDITION_REASON_PATTERN, min_length=1, max_length=1024
        )
    )
    message: str = dataclasses.field(metadata=wire.json("message", max_length=32768))


def conditions(*, max_items: int | None = None) -> Any:
    """A status's ``conditions`` field: :class:`Condition` items, a list map keyed by ``type``.

    Declared as ``conditions: tuple[meta.Condition, ...] = meta.conditions()``: empty by
    default, and server-side apply merges the conditions by type (each writer owns its own).
    """
    return dataclasses.field(
        default=(), metadata=wire.json("conditions", list_type="map", list_map_keys=("type",),
                                       max_items=max_items)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ObjectMeta(wire.Model):
    """The subset of metav1.ObjectMeta the controllers use.

    Server-managed fields not listed here (``managedFields``,
    ``ownerReferences``, ...) are ignored on decode and absent from
    ``to_dict()``: write with patches or the status subresource, never by
    replacing a whole object built from this model.
    """

    WIRE_OPEN = True

    name: str = dataclasses.field(default="", metadata=wire.json("name"))
    generate_name: str = dataclasses.field(default="", metadata=wire.json("generateName"))
    namespace: str = dataclasses.field(default="", metadata=wire.json("namespace"))
    uid: str = dataclasses.field(default="", metadata=wire.json("uid"))
    resource_version: str = dataclasses.field(default="", metadata=wire.json("resourceVersion"))
    generation: int = dataclasses.field(default=0, metadata=wire.json("generation", fmt="int64"))
    creation_timestamp: datetime.datetime | None = dataclasses.field(
        default=None, metadata=wire.json("creationTimestamp")
    )
    deletion_timestamp: datetime.datetime | None = dataclasses.field(
        default=None, metadata=wire.json("deletionTimestamp")
    )
    labels: Mapping[str, str] = dataclasses.field(
        default_factory=dict, metadata=wire.json("labels")
    )
    annotations: Mapping[str, str] = dataclasses.field(
        default_factory=dict, metadata=wire.json("annotations")
    )
    finalizers: tuple[str, ...] = dataclasses.field(default=(), metadata=wire.json("finalizers"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Object(wire.Model):
    """What every top-level kind starts with: Go's embedded ``TypeMeta`` and ``ObjectMeta``.

    A kind subclasses it naming its resource, ``class Work(meta.Object,
    resource=groups.WORK)``, which pins ``api_version`` and ``kind`` to the
    resource's (:func:`wire.pinned`: the default and the ``const``), and adds its
    ``spec`` (:func:`spec`) and ``status`` (:func:`status`); the wire keys keep
    this order.
    """

    api_version: str = dataclasses.field(metadata=wire.json("apiVersion"))
    kind: str = dataclasses.field(metadata=wire.json("kind"))
    metadata: ObjectMeta = dataclasses.field(
        default_factory=ObjectMeta, metadata=wire.json("metadata")
    )

    def __init_subclass__(cls, resource: resources.Resource | None = None,
                          **kwargs: Any) -> None:
        """Pin ``api_version`` and ``kind`` of a kind to those of its ``resource``.

        Runs before the subclass's ``@dataclasses.dataclass`` reads its fields, so
        the two pinned fields are the subclass's own, in their place before
        ``metadata``; a class without ``resource`` (what two kinds share) pins none.
        """
        super().__init_subclass__(**kwargs)
        if resource is None:
            return
        cls.api_version = wire.pinned("apiVersion", resource.api_version)
        cls.kind = wire.pinned("kind", resource.kind)
        cls.__annotations__ = {"api_version": str, "kind": str,
                               **inspect.get_annotations(cls)}


def spec() -> Any:
    """A kind's required ``spec`` field: ``spec: WorkSpec = meta.spec()``."""
    return dataclasses.field(metadata=wire.json("spec"))


def status(factory: Callable[[], wire.Model]) -> Any:
    """A kind's ``status`` field, empty when absent.

    Declared as ``status: WorkStatus = meta.status(WorkStatus)``.
    """
    return dataclasses.field(default_factory=factory, metadata=wire.json("status"))


def find_condition(conditions: Iterable[Condition], type: str) -> Condition | None:
    """The condition of the given ``type``, or None when there is none."""
    for condition in conditions:
        if condition.type == type:
            return condition
    return None


def set_condition(conditions: Iterable[Condition], condition: Condition) -> tuple[Condition, ...]:
    """Return a new condition list with ``condition`` added or replacing its type.

    ``lastTransitionTime`` comes from ``condition`` only when the status flips
    (or the type is new); otherwise the existing time is kept, while reason,
    message and observedGeneration are always updated.  Order is preserved and
    the input is not modified.
    """
    result: list[Condition] = []
    replaced = False
    for existing in conditions:
        if existing.type != condition.type:
            result.append(existing)
            continue
        if replaced:
            continue  # drop duplicates of the type: list-map keys are unique
        replaced = True
        if existing.status == condition.status:
            result.append(
                dataclasses.replace(condition, last_transition_time=existing.last_transition_time)
            )
        else:
            result.append(condition)
    if not replaced:
        result.append(condition)
    return tuple(result)


def remove_condition(conditions: Iterable[Condition], type: str) -> tuple[Condition, ...]:
    """Return a new condition list without conditions of the given ``type``."""
    return tuple(condition for condition in conditions if condition.type != type)
