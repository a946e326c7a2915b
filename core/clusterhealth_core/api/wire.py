"""Map frozen dataclass models to and from the Kubernetes JSON wire shape.

Every model field carries its wire name and its schema constraints in
``dataclasses.field(metadata=...)`` (built with :func:`json`).  One generic codec
reads that metadata and the type hints, so decoding, encoding and the CRD
agreement test (``tests/api``) all work from the same declaration instead of
three hand-written copies that could drift apart.

Decoding validates like the API server would (required fields, enums, string
patterns and lengths, integer formats, list-map key uniqueness) and raises
:class:`ValidationError` naming the offending field path.  Encoding omits
optional fields that hold their empty default, like Go's ``omitempty``.

A field typed :data:`RawObject` holds an arbitrary JSON object kept as is (a
``runtime.RawExtension``: a Work's manifests, a member object's status); its
CRD node preserves unknown fields.
"""

import dataclasses
import datetime
import difflib
import enum
import functools
import operator
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Self, TypeVar

from clusterhealth_core import clock

JSON_KEY = "json"
"""Field metadata key holding the camelCase wire name."""

RawObject = Mapping[str, Any]
"""An arbitrary JSON object, decoded and encoded unchanged.

Its CRD node is ``type: object`` with ``x-kubernetes-preserve-unknown-fields``.
"""

_RFC3339 = r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


def did_you_mean(given: str, choices: Sequence[str]) -> str:
    """`` (did you mean 'X'?)`` for the closest of ``choices`` (case first), else ``""``."""
    folded = [c for c in choices if c.lower() == given.lower()]
    close = folded or difflib.get_close_matches(given, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class ValidationError(ValueError):
    """An object does not match its schema; ``path`` names the offending field."""

    def __init__(self, path: str, reason: str) -> None:
        """Build ``"<path>: <reason>"`` (just the reason at the root)."""
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason


def json(
    name: str,
    *,
    const: str | None = None,
    pattern: str | None = None,
    min_length: int | None = None,
    max_length: int | None = None,
    fmt: str | None = None,
    minimum: int | None = None,
    maximum: int | None = None,
    min_items: int | None = None,
    max_items: int | None = None,
    list_type: str | None = None,
    list_map_keys: tuple[str, ...] = (),
    defaulted: bool = False,
) -> dict[str, Any]:
    """Field metadata: wire ``name`` plus the schema constraints of the field.

    Scalar constraints (``pattern``, lengths, ``fmt``, bounds) apply to the
    scalar leaf, i.e. to each item of a list or value of a map.  ``min_items``,
    ``max_items``, ``list_type`` (``atomic``/``set``/``map``) and ``list_map_keys`` apply to
    the list itself.  ``const`` pins ``apiVersion``/``kind``.  ``defaulted``
    says that the CRD declares the field's Python default as its ``default``,
    so the API server stores that value when the field is absent (decoding an
    object without the field gives the same value).
    """
    if list_map_keys and list_type != "map":
        raise ValueError(f"{name}: list_map_keys needs list_type='map'")
    if fmt not in (None, "int32", "int64"):
        raise ValueError(f"{name}: unsupported integer format {fmt!r}")
    meta: dict[str, Any] = {JSON_KEY: name}
    options: dict[str, Any] = {
        "const": const,
        "pattern": pattern,
        "min_length": min_length,
        "max_length": max_length,
        "fmt": fmt,
        "minimum": minimum,
        "maximum": maximum,
        "min_items": min_items,
        "max_items": max_items,
        "list_type": list_type,
    }
    meta.update({key: value for key, value in options.items() if value is not None})
    if list_map_keys:
        meta["list_map_keys"] = list_map_keys
    if defaulted:
        meta["defaulted"] = True
    return meta


def pinned(name: str, value: str) -> Any:
    """A field fixed to ``value`` (``apiVersion``, ``kind``): its default and its ``const``.

    A kind gets its two from its resource (``class Work(meta.Object,
    resource=groups.WORK)``): the value is written once where it was twice
    (default and constraint) and could drift.
    """
    return dataclasses.field(default=value, metadata=json(name, const=value))


class Model:
    """Base of every wire model: ``from_dict`` validates, ``to_dict`` serializes.

    Subclasses are ``@dataclasses.dataclass(frozen=True, kw_only=True)`` classes
    whose fields all carry :func:`json` metadata.  A field without a default is
    required on the wire.
    """

    WIRE_OPEN: ClassVar[bool] = False
    """True when unknown keys are expected (ObjectMeta) even in strict mode."""

    WIRE_ATOMIC: ClassVar[bool] = False
    """True for Go ``+structType=atomic`` types (``x-kubernetes-map-type: atomic``):
    server-side apply replaces such an object whole instead of merging its fields."""

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], *, strict: bool = False) -> Self:
        """Decode and validate ``obj``; raise :class:`ValidationError` on bad input.

        Unknown keys are ignored like Go's JSON decoder does (so objects from a
        newer Karmada still load), unless ``strict`` is true, which rejects them
        as the API server does with ``fieldValidation=Strict``.

        Size bounds (``max_items``, ``max_length``) are checked in strict mode
        only: they are the CRD's, which the API server enforces on every write.
        Decoding what a server stored, a controller takes it whole, also from
        Karmada's API, whose CRDs set fewer bounds than ours; strict decoding
        (tests, ``clusterhealth remedy test`` on a user's file) says what our
        API server would refuse.
        """
        return _decode_object(cls, obj, "", strict)

    def to_dict(self) -> dict[str, Any]:
        """Encode to the camelCase wire shape, omitting empty optional fields."""
        return _encode_object(self)

    def check(self, path: str) -> None:
        """Cross-field rules a per-field schema cannot express (CEL in the CRD).

        ``path`` is this object's field path, for error messages.  The default
        has no rules.
        """


M = TypeVar("M", bound=Model)


def parse_time(value: str) -> datetime.datetime:
    """Parse an RFC 3339 timestamp into an aware UTC datetime (whole seconds).

    Sub-second digits are dropped: ``metav1.Time`` carries whole seconds on
    the wire, so keeping them would make a decode/encode round trip lossy.
    """
    match = re.match(_RFC3339, value)
    if match is None:
        raise ValueError(f"not an RFC 3339 date-time: {value!r}")
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    zone = match.group(8)
    if zone in ("Z", "z"):
        tz = datetime.UTC
    else:
        sign = 1 if zone[0] == "+" else -1
        offset = datetime.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
        tz = datetime.timezone(sign * offset)
    try:
        parsed = datetime.datetime(year, month, day, hour, minute, second, tzinfo=tz)
    except ValueError as error:
        raise ValueError(f"not an RFC 3339 date-time: {value!r} ({error})") from None
    return parsed.astimezone(datetime.UTC)


def format_time(value: datetime.datetime) -> str:
    """Format an aware datetime as RFC 3339 in UTC with whole seconds (``...Z``)."""
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise ValueError(f"naive datetime {value!r}: attach a timezone (use UTC)")
    return clock.format_rfc3339(value)


def is_required(field: dataclasses.Field[Any]) -> bool:
    """Whether ``field`` must be present on the wire (it has no default)."""
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def wire_fields(cls: type[Model]) -> dict[str, dataclasses.Field[Any]]:
    """The dataclass fields of ``cls`` keyed by wire name, in declaration order."""
    return dict(_wire_fields(cls))


def type_hints(cls: type[Model]) -> dict[str, Any]:
    """Resolved type hints of ``cls`` (attribute name to type)."""
    return dict(_type_hints(cls))


def strip_optional(tp: Any) -> tuple[Any, bool]:
    """Return ``(T, True)`` for ``T | None``, else ``(tp, False)``."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        if len(args) < len(typing.get_args(tp)):
            if len(args) == 1:
                return args[0], True
            return functools.reduce(operator.or_, args), True
    return tp, False


def is_raw_object(tp: Any) -> bool:
    """Whether ``tp`` is :data:`RawObject` (a JSON object kept as is)."""
    origin = typing.get_origin(tp)
    return origin is not None and origin in (dict, Mapping) and typing.get_args(tp)[1] is Any


def encoded_default(field: dataclasses.Field[Any]) -> Any:
    """The wire form of ``field``'s Python default (what a CRD ``default`` must say)."""
    if field.default is not dataclasses.MISSING:
        return _encode_value(field.default)
    if field.default_factory is not dataclasses.MISSING:
        return _encode_value(field.default_factory())
    raise ValueError(f"{field.name} has no default")


def is_int_or_string(tp: Any) -> bool:
    """Whether ``tp`` is ``str | int`` (Kubernetes IntOrString / Quantity)."""
    if typing.get_origin(tp) not in (typing.Union, types.UnionType):
        return False
    return set(typing.get_args(tp)) == {str, int}


_FIELDS: dict[type, tuple[tuple[str, dataclasses.Field[Any]], ...]] = {}
_HINTS: dict[type, tuple[tuple[str, Any], ...]] = {}


def _wire_fields(cls: type) -> tuple[tuple[str, dataclasses.Field[Any]], ...]:
    cached = _FIELDS.get(cls)
    if cached is None:
        result: list[tuple[str, dataclasses.Field[Any]]] = []
        for field in dataclasses.fields(cls):
            name = field.metadata.get(JSON_KEY)
            if not isinstance(name, str):
                raise TypeError(f"{cls.__name__}.{field.name} has no wire name metadata")
            result.append((name, field))
        cached = _FIELDS[cls] = tuple(result)
    return cached


def _type_hints(cls: type) -> tuple[tuple[str, Any], ...]:
    cached = _HINTS.get(cls)
    if cached is None:
        cached = _HINTS[cls] = tuple(typing.get_type_hints(cls).items())
    return cached


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _decode_object(cls: type[M], obj: object, path: str, strict: bool) -> M:
    if not isinstance(obj, Mapping):
        raise ValidationError(path, f"must be an object, got {_type_name(obj)}")
    hints = dict(_type_hints(cls))
    kwargs: dict[str, Any] = {}
    for name, field in _wire_fields(cls):
        sub = _join(path, name)
        raw = obj.get(name)
        if raw is None:  # absent or JSON null: the API server prunes nulls
            if is_required(field):
                raise ValidationError(sub, "required")
            continue
        const = field.metadata.get("const")
        if const is not None and raw != const:
            raise ValidationError(sub, f"must be {const}; got {raw!r}")
        kwargs[field.name] = _decode_value(hints[field.name], raw, sub, field.metadata, strict)
    if strict and not cls.WIRE_OPEN:
        known = {name for name, _ in _wire_fields(cls)}
        unknown = sorted(str(key) for key in obj if key not in known)
        if unknown:
            raise ValidationError(_join(path, unknown[0]),
                                  "unknown field" + did_you_mean(unknown[0], sorted(known)))
    instance = cls(**kwargs)
    instance.check(path)
    return instance


def _decode_value(tp: Any, raw: object, path: str, meta: Mapping[str, Any], strict: bool) -> Any:
    tp, _ = strip_optional(tp)
    origin = typing.get_origin(tp)
    if is_int_or_string(tp):
        if isinstance(raw, bool) or not isinstance(raw, int | str):
            raise ValidationError(path, f"must be an integer or a string, got {_type_name(raw)}")
        if isinstance(raw, str):
            _check_string(raw, path, meta, strict)
        return raw
    if origin is tuple:
        return _decode_list(tp, raw, path, meta, strict)
    if is_raw_object(tp):
        if not isinstance(raw, Mapping):
            raise ValidationError(path, f"must be an object, got {_type_name(raw)}")
        return _copy_json(raw, path)
    if origin is not None and origin in (dict, Mapping):
        if not isinstance(raw, Mapping):
            raise ValidationError(path, f"must be an object, got {_type_name(raw)}")
        value_type = typing.get_args(tp)[1]
        return {
            str(key): _decode_value(value_type, value, f"{path}[{key}]", meta, strict)
            for key, value in raw.items()
        }
    if isinstance(tp, type) and issubclass(tp, Model):
        return _decode_object(tp, raw, path, strict)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        allowed = [str(member.value) for member in tp]
        if isinstance(raw, bool):  # YAML's unquoted True/False
            raise ValidationError(path, f"must be one of {', '.join(allowed)}; got {raw!r} "
                                        f"(a boolean: quote it, \"{raw}\")")
        if not isinstance(raw, str) or raw not in allowed:
            hint = did_you_mean(raw, allowed) if isinstance(raw, str) else ""
            raise ValidationError(path, f"must be one of {', '.join(allowed)}; got {raw!r}{hint}")
        return tp(raw)
    if tp is str:
        if not isinstance(raw, str):
            raise ValidationError(path, f"must be a string, got {_type_name(raw)}")
        _check_string(raw, path, meta, strict)
        return raw
    if tp is bool:
        if not isinstance(raw, bool):
            raise ValidationError(path, f"must be a boolean, got {_type_name(raw)}")
        return raw
    if tp is int:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise ValidationError(path, f"must be an integer, got {_type_name(raw)}")
        _check_int(raw, path, meta)
        return raw
    if tp is datetime.datetime:
        if not isinstance(raw, str):
            raise ValidationError(
                path, f"must be an RFC 3339 date-time string, got {_type_name(raw)}"
            )
        try:
            return parse_time(raw)
        except ValueError:
            raise ValidationError(path, f"must be an RFC 3339 date-time; got {raw!r}") from None
    raise TypeError(f"{path}: unsupported model type {tp!r}")


def _copy_json(raw: object, path: str) -> Any:
    """A deep copy of a JSON value in plain dicts and lists (tuples become lists)."""
    if raw is None or isinstance(raw, bool | int | float | str):
        return raw
    if isinstance(raw, Mapping):
        return {str(key): _copy_json(value, f"{path}[{key}]") for key, value in raw.items()}
    if isinstance(raw, list | tuple):
        return [_copy_json(item, f"{path}[{index}]") for index, item in enumerate(raw)]
    raise ValidationError(path, f"must be a JSON value, got {_type_name(raw)}")


def _decode_list(
    tp: Any, raw: object, path: str, meta: Mapping[str, Any], strict: bool
) -> tuple[Any, ...]:
    if not isinstance(raw, list | tuple):
        raise ValidationError(path, f"must be a list, got {_type_name(raw)}")
    min_items = meta.get("min_items")
    if min_items is not None and len(raw) < min_items:
        raise ValidationError(path, f"must have at least {min_items} item(s)")
    max_items = meta.get("max_items")
    if strict and max_items is not None and len(raw) > max_items:
        raise ValidationError(path, f"must have at most {max_items} item(s)")
    item_type = typing.get_args(tp)[0]
    items = tuple(
        _decode_value(item_type, item, f"{path}[{index}]", meta, strict)
        for index, item in enumerate(raw)
    )
    list_type = meta.get("list_type")
    if list_type == "set":
        seen_values: set[Any] = set()
        for index, item in enumerate(items):
            if item in seen_values:
                raise ValidationError(f"{path}[{index}]", f"duplicate value {item!r}")
            seen_values.add(item)
    elif list_type == "map":
        keys: tuple[str, ...] = meta["list_map_keys"]
        attrs = {name: field.name for name, field in _wire_fields(item_type)}
        seen_keys: set[tuple[Any, ...]] = set()
        for index, item in enumerate(items):
            key = tuple(getattr(item, attrs[name]) for name in keys)
            if key in seen_keys:
                shown = ", ".join(f"{name}={value}" for name, value in zip(keys, key, strict=True))
                raise ValidationError(f"{path}[{index}]", f"duplicate entry for {shown}")
            seen_keys.add(key)
    return items


def _check_string(raw: str, path: str, meta: Mapping[str, Any], strict: bool) -> None:
    min_length = meta.get("min_length")
    if min_length is not None and len(raw) < min_length:
        if min_length == 1:
            raise ValidationError(path, "must not be empty")
        raise ValidationError(path, f"must be at least {min_length} characters")
    max_length = meta.get("max_length")
    if strict and max_length is not None and len(raw) > max_length:
        raise ValidationError(path, f"must be at most {max_length} characters")
    pattern = meta.get("pattern")
    if pattern is not None and re.search(pattern, raw) is None:
        raise ValidationError(path, f"must match {pattern}; got {raw!r}")


def _check_int(raw: int, path: str, meta: Mapping[str, Any]) -> None:
    fmt = meta.get("fmt")
    bounds = {"int32": _INT32, "int64": _INT64}.get(fmt) if fmt else None
    if bounds is not None and not bounds[0] <= raw <= bounds[1]:
        raise ValidationError(path, f"must fit in {fmt}; got {raw}")
    minimum = meta.get("minimum")
    if minimum is not None and raw < minimum:
        raise ValidationError(path, f"must be >= {minimum}; got {raw}")
    maximum = meta.get("maximum")
    if maximum is not None and raw > maximum:
        raise ValidationError(path, f"must be <= {maximum}; got {raw}")


def _encode_object(obj: Model) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, field in _wire_fields(type(obj)):
        value = getattr(obj, field.name)
        if _omit(field, value):
            continue
        out[name] = _encode_value(value)
    return out


def _omit(field: dataclasses.Field[Any], value: object) -> bool:
    """Go's omitempty: drop an optional field still holding its empty default."""
    if is_required(field) or "const" in field.metadata:
        return False
    if field.default is not dataclasses.MISSING:
        default: object = field.default
    else:
        factory = typing.cast(Callable[[], object], field.default_factory)
        default = factory()
    return bool(value == default)


def _encode_value(value: object) -> Any:
    if value is None or (
        isinstance(value, bool | int | float | str) and not isinstance(value, enum.Enum)
    ):
        return value
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime.datetime):
        return format_time(value)
    if isinstance(value, Model):
        return _encode_object(value)
    if isinstance(value, tuple | list):
        return [_encode_value(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): _encode_value(item) for key, item in value.items()}
    raise TypeError(f"cannot encode {type(value).__name__}")
