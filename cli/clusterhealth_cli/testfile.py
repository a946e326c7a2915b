"""Remedy test files: read, validated as strictly as the API server would, or refused clearly.

A test file holds Remedies (inline, or manifest files named relative to it)
and cases: fixture Clusters with conditions and the ``remedyActions`` each
should get (the format is in ``docs/cli.md``).  Remedies are decoded with the
same model the controller and the CRD use
(:class:`clusterhealth_core.api.remedy.Remedy`), in strict mode, which
rejects unknown fields as ``kubectl apply`` (``fieldValidation=Strict``) does:
a Remedy that passes here is one the API server accepts, and one that the
API server would reject fails here with the field's path.

Everything wrong with a file is a :class:`~clusterhealth_cli.errors.CliError`
with code :data:`~clusterhealth_cli.errors.INPUT` naming the file and the field.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from clusterhealth_cli import errors
from clusterhealth_core.api import groups, meta, remedy, wire

TOP_LEVEL = ("remedyFiles", "remedies", "tests")
CASE_KEYS = ("name", "clusters", "expect")
CLUSTER_KEYS = ("name", "labels", "conditions")
EXPECT_KEYS = ("cluster", "remedyActions", "remedyActionSources")
SOURCE_KEYS = ("action", "remedies")
CONDITION_STATUSES = tuple(status.value for status in meta.ConditionStatus)
ACTIONS = tuple(action.value for action in remedy.RemedyAction)
LIST_KINDS = ("List", "RemedyList")
"""``kubectl get remedies -o yaml`` writes a List whose items are the Remedies."""
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
"""A DNS-1123 subdomain: what the API server accepts as a cluster-scoped object's name."""
MAX_NAME = 253
DOCS = "docs/cli.md"


@dataclasses.dataclass(frozen=True)
class FixtureCluster:
    """A Cluster as the decision sees it: a name and its conditions."""

    name: str
    conditions: Mapping[str, str]
    """Condition type to status (``"True"``, ``"False"``, ``"Unknown"``)."""
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Kept for the reader: Remedies select clusters by name, so labels decide nothing."""


@dataclasses.dataclass(frozen=True)
class Expectation:
    """What one fixture Cluster's status should hold after the remedy controller ran."""

    cluster: str
    remedy_actions: tuple[str, ...]
    """Sorted and without duplicates, as the controller writes them."""
    remedy_action_sources: Mapping[str, tuple[str, ...]] | None
    """Action to the sorted Remedy names; None when the test does not check provenance."""


@dataclasses.dataclass(frozen=True)
class Case:
    """One test: fixture Clusters and the expected outcome for each."""

    name: str
    clusters: tuple[FixtureCluster, ...]
    expect: tuple[Expectation, ...]
    """One per fixture Cluster: those the file does not list expect no action."""


@dataclasses.dataclass(frozen=True)
class Suite:
    """A whole test file: its Remedies and its cases."""

    path: pathlib.Path
    remedies: tuple[remedy.Remedy, ...]
    origins: Mapping[str, str]
    """Remedy name to where it was defined (``remedies.yaml, document 2``)."""
    cases: tuple[Case, ...]


def fail(where: str, reason: str) -> errors.CliError:
    """An input error ``"<where>: <reason>"``."""
    return errors.CliError(f"{where}: {reason}", errors.INPUT)


def _type_name(value: object) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__


def _mapping(value: object, where: str, allowed: Sequence[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise fail(where, f"must be a mapping, got {_type_name(value)}")
    unknown = sorted(str(key) for key in value if key not in allowed)
    if unknown:
        raise fail(_field(where, unknown[0]),
                   f"unknown field{wire.did_you_mean(unknown[0], allowed)} (allowed here: "
                   f"{', '.join(allowed)})")
    return value


def _field(where: str, key: str) -> str:
    """``where.key``; at a file's top level (``where`` ends with ``:``) ``file: key``."""
    return f"{where} {key}" if where.endswith(":") else f"{where}.{key}"


def _list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise fail(where, f"must be a list, got {_type_name(value)}")
    return value


def _string(value: object, where: str, *, hint: str = "") -> str:
    if not isinstance(value, str) or not value:
        extra = f" ({hint})" if hint and isinstance(value, bool) else ""
        raise fail(where, f"must be a non-empty string, got {_type_name(value)}{extra}")
    return value


# --- YAML -------------------------------------------------------------------------------

def read_yaml(path: pathlib.Path, *, what: str) -> list[Any]:
    """Every YAML document of ``path`` (empty documents dropped), or an input error."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise fail(str(path), f"{what} not found") from None
    except IsADirectoryError:
        raise fail(str(path), f"is a directory, not a {what}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(str(path), f"cannot read the {what}: {exc}") from None
    try:
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        raise fail(str(path), f"not valid YAML: {_yaml_error(exc)}") from None
    return documents


def _yaml_error(exc: yaml.YAMLError) -> str:
    """PyYAML's message on one line, with the position it names."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is not None and problem:
        context = getattr(exc, "context", None)
        about = f" ({context})" if context else ""
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}{about}"
    return " ".join(str(exc).split())


# --- Remedies ---------------------------------------------------------------------------

def parse_remedy(obj: object, where: str) -> remedy.Remedy:
    """One Remedy manifest, validated as the API server validates it (strict fields)."""
    if not isinstance(obj, Mapping):
        raise fail(where, f"must be a Remedy manifest (a mapping), got {_type_name(obj)}")
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if (api_version, kind) != (groups.REMEDY.api_version, groups.REMEDY.kind):
        raise fail(where, f"not a Remedy: apiVersion {api_version!r}, kind {kind!r} "
                          f"(a Remedy has apiVersion {groups.REMEDY.api_version}, "
                          f"kind {groups.REMEDY.kind})")
    name = (obj.get("metadata") or {}).get("name") if isinstance(obj.get("metadata"),
                                                                  Mapping) else None
    label = f"Remedy {name}" if isinstance(name, str) and name else "Remedy"
    try:
        parsed = remedy.Remedy.from_dict(obj, strict=True)
    except meta.ValidationError as exc:
        raise fail(where, f"invalid {label}: {exc}") from None
    name = parsed.metadata.name
    if not name:
        raise fail(where, "invalid Remedy: metadata.name: required")
    if len(name) > MAX_NAME or not _NAME.match(name):
        raise fail(where, f"invalid Remedy: metadata.name: {name!r} is not a valid name "
                          "(lower-case letters, digits, '-' and '.', at most 253 characters)")
    return parsed


def remedies_in(documents: Sequence[Any], where: str) -> list[tuple[remedy.Remedy, str]]:
    """The Remedies of a manifest file's documents (a List's items too), with their origin."""
    found: list[tuple[remedy.Remedy, str]] = []
    for number, document in enumerate(documents, start=1):
        at = f"{where}, document {number}" if len(documents) > 1 else where
        if isinstance(document, Mapping) and document.get("kind") in LIST_KINDS:
            for item_number, item in enumerate(_list(document.get("items"), f"{at}: items"),
                                               start=1):
                item_at = f"{at}, item {item_number}"
                found.append((parse_remedy(item, item_at), item_at))
            continue
        found.append((parse_remedy(document, at), at))
    return found


# --- fixtures and expectations ----------------------------------------------------------

def _conditions(value: object, where: str) -> dict[str, str]:
    """``{type: status}``, or the Cluster's own list of ``{type, status, ...}``."""
    entries: list[tuple[object, object, str]] = []
    if value is None:
        return {}
    if isinstance(value, Mapping):
        entries = [(key, status, f"{where}.{key}") for key, status in value.items()]
    elif isinstance(value, list):
        for number, item in enumerate(value):
            at = f"{where}[{number}]"
            if not isinstance(item, Mapping):
                raise fail(at, f"must be a condition (type, status), got {_type_name(item)}")
            entries.append((item.get("type"), item.get("status"), f"{at}.status"))
    else:
        raise fail(where, "must map condition types to statuses "
                          f"(Ready: \"True\") or list conditions, got {_type_name(value)}")
    conditions: dict[str, str] = {}
    for ctype, status, at in entries:
        if not isinstance(ctype, str) or not re.match(meta.CONDITION_TYPE_PATTERN, ctype):
            raise fail(at.rsplit(".", 1)[0] if at.endswith(".status") else at,
                       f"{ctype!r} is not a condition type (CamelCase, e.g. Ready)")
        if ctype in conditions:
            raise fail(at, f"condition {ctype} given twice")
        if isinstance(status, bool):
            raise fail(at, f"must be one of {', '.join(CONDITION_STATUSES)}, got the boolean "
                           f"{status}: quote it (\"{status}\"), as in a Remedy")
        if status not in CONDITION_STATUSES:
            hint = wire.did_you_mean(status, CONDITION_STATUSES) if isinstance(status, str) else ""
            raise fail(at, f"must be one of {', '.join(CONDITION_STATUSES)}, "
                           f"got {_type_name(status)}{hint}")
        conditions[ctype] = str(status)
    return conditions


def _labels(value: object, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise fail(where, f"must map label keys to values, got {_type_name(value)}")
    labels: dict[str, str] = {}
    for key, label in value.items():
        if not isinstance(key, str) or not isinstance(label, str):
            raise fail(f"{where}.{key}", f"labels are strings, got {_type_name(label)}")
        labels[key] = label
    return labels


def parse_cluster(obj: object, where: str) -> FixtureCluster:
    """One fixture Cluster: ``name``, optional ``labels`` and ``conditions``."""
    body = _mapping(obj, where, CLUSTER_KEYS)
    name = _string(body.get("name"), f"{where}.name")
    return FixtureCluster(name=name, conditions=_conditions(body.get("conditions"),
                                                            f"{where}.conditions"),
                          labels=_labels(body.get("labels"), f"{where}.labels"))


def _actions(value: object, where: str) -> tuple[str, ...]:
    actions: set[str] = set()
    for number, action in enumerate(_list(value, where)):
        at = f"{where}[{number}]"
        if action not in ACTIONS:
            hint = wire.did_you_mean(action, ACTIONS) if isinstance(action, str) else ""
            raise fail(at, f"{action!r} is not a remedy action{hint} (known: "
                           f"{', '.join(ACTIONS)})")
        actions.add(str(action))
    return tuple(sorted(actions))


def parse_expectation(obj: object, where: str, clusters: Sequence[str]) -> Expectation:
    """One ``expect`` entry; its cluster must be one of the case's fixtures."""
    body = _mapping(obj, where, EXPECT_KEYS)
    name = _string(body.get("cluster"), f"{where}.cluster")
    if name not in clusters:
        raise fail(f"{where}.cluster", f"{name!r} is not a cluster of this test "
                                       f"(its clusters: {', '.join(clusters) or 'none'})")
    if "remedyActions" not in body:
        raise fail(f"{where}.remedyActions", "required (use [] to expect no action)")
    actions = _actions(body.get("remedyActions"), f"{where}.remedyActions")
    sources: dict[str, tuple[str, ...]] | None = None
    if "remedyActionSources" in body:
        sources = {}
        for number, item in enumerate(_list(body["remedyActionSources"],
                                            f"{where}.remedyActionSources")):
            at = f"{where}.remedyActionSources[{number}]"
            entry = _mapping(item, at, SOURCE_KEYS)
            (action,) = _actions([entry.get("action")], f"{at}.action")
            if action in sources:
                raise fail(f"{at}.action", f"{action} listed twice")
            names = [_string(n, f"{at}.remedies[{i}]")
                     for i, n in enumerate(_list(entry.get("remedies"), f"{at}.remedies"))]
            sources[action] = tuple(sorted(set(names)))
    return Expectation(name, actions, sources)


def parse_case(obj: object, where: str) -> Case:
    """One test case: its fixture clusters and their expected outcome."""
    body = _mapping(obj, where, CASE_KEYS)
    name = _string(body.get("name"), f"{where}.name")
    where = f"{where} ({name})"
    clusters: list[FixtureCluster] = []
    for number, item in enumerate(_list(body.get("clusters"), f"{where}.clusters")):
        fixture = parse_cluster(item, f"{where}.clusters[{number}]")
        if any(c.name == fixture.name for c in clusters):
            raise fail(f"{where}.clusters[{number}].name", f"cluster {fixture.name} given twice")
        clusters.append(fixture)
    if not clusters:
        raise fail(f"{where}.clusters", "needs at least one cluster")
    names = [c.name for c in clusters]
    expect: list[Expectation] = []
    for number, item in enumerate(_list(body.get("expect", []), f"{where}.expect")):
        expectation = parse_expectation(item, f"{where}.expect[{number}]", names)
        if any(e.cluster == expectation.cluster for e in expect):
            raise fail(f"{where}.expect[{number}].cluster",
                       f"cluster {expectation.cluster} expected twice")
        expect.append(expectation)
    listed = {e.cluster for e in expect}
    expect += [Expectation(n, (), None) for n in names if n not in listed]
    return Case(name, tuple(clusters), tuple(expect))


# --- the file ---------------------------------------------------------------------------

def _not_a_test_file(path: pathlib.Path, document: object) -> errors.CliError:
    if isinstance(document, Mapping) and ("kind" in document or "apiVersion" in document):
        kind = document.get("kind")
        if kind == groups.REMEDY.kind or kind in LIST_KINDS:
            return fail(str(path), f"this is a {kind} manifest, not a test file: list it under "
                                   f"remedyFiles in a test file (see {DOCS})")
        return fail(str(path), f"this is a {kind or 'Kubernetes'} manifest, not a Remedy test "
                               f"file (see {DOCS})")
    return fail(str(path), "not a Remedy test file: expected a mapping with remedyFiles or "
                           f"remedies, and tests (see {DOCS}), got {_type_name(document)}")


def parse(document: object, path: pathlib.Path) -> Suite:
    """A test file's document; ``remedyFiles`` are read relative to ``path``'s folder."""
    if (not isinstance(document, Mapping) or "kind" in document or "apiVersion" in document
            or "tests" not in document):
        raise _not_a_test_file(path, document)
    where = str(path)
    body = _mapping(document, f"{where}:", TOP_LEVEL)
    found: list[tuple[remedy.Remedy, str]] = []
    for number, item in enumerate(_list(body.get("remedyFiles", []), f"{where}: remedyFiles")):
        name = _string(item, f"{where}: remedyFiles[{number}]")
        manifest = (path.parent / name)
        documents = read_yaml(manifest, what="Remedy manifest")
        if not documents:
            raise fail(str(manifest), "holds no Remedy")
        found += remedies_in(documents, str(manifest))
    for number, item in enumerate(_list(body.get("remedies", []), f"{where}: remedies")):
        at = f"{where}: remedies[{number}]"
        found.append((parse_remedy(item, at), at))
    origins: dict[str, str] = {}
    for parsed, origin in found:
        name = parsed.metadata.name
        if name in origins:
            raise fail(origin, f"Remedy {name} is defined twice (also in {origins[name]}); "
                               "Remedies are cluster-scoped, so names must be unique")
        origins[name] = origin
    cases = [parse_case(item, f"{where}: tests[{number}]")
             for number, item in enumerate(_list(body.get("tests"), f"{where}: tests"))]
    if not cases:
        raise fail(f"{where}: tests", "no test in the file")
    seen: set[str] = set()
    for number, case in enumerate(cases):
        if case.name in seen:
            raise fail(f"{where}: tests[{number}].name", f"test {case.name!r} given twice")
        seen.add(case.name)
        for expectation in case.expect:
            named = {n for names in (expectation.remedy_action_sources or {}).values()
                     for n in names}
            unknown = sorted(named - set(origins))
            if unknown:
                raise fail(f"{where}: tests[{number}] ({case.name})",
                           f"expects Remedy {unknown[0]} on {expectation.cluster}, but the "
                           f"file defines no Remedy of that name (it defines: "
                           f"{', '.join(sorted(origins)) or 'none'})")
    return Suite(path, tuple(r for r, _ in found), origins, tuple(cases))


TEST_FILE_SUFFIXES = (".yaml", ".yml")


def test_files(directory: pathlib.Path) -> tuple[list[pathlib.Path], list[pathlib.Path]]:
    """A folder's test files, and the manifests beside them (the Remedies they name).

    Every ``*.yaml``/``*.yml`` file under ``directory`` (sorted, subfolders too):
    a file whose first document has a ``kind`` is a manifest, not a test file.
    """
    tests: list[pathlib.Path] = []
    manifests: list[pathlib.Path] = []
    for path in sorted(p for p in directory.rglob("*") if p.suffix in TEST_FILE_SUFFIXES
                       and p.is_file()):
        try:
            documents = read_yaml(path, what="file")
        except errors.CliError:
            tests.append(path)  # load() reports what is wrong with it
            continue
        first = documents[0] if documents else None
        if isinstance(first, Mapping) and ("kind" in first or "apiVersion" in first):
            manifests.append(path)
        else:
            tests.append(path)
    return tests, manifests


def load(path: pathlib.Path) -> Suite:
    """Read and validate one test file and the Remedy manifests it names."""
    documents = read_yaml(path, what="test file")
    if not documents:
        raise fail(str(path), f"is empty: not a Remedy test file (see {DOCS})")
    if len(documents) > 1:
        first = documents[0]
        if isinstance(first, Mapping) and "kind" in first:
            raise _not_a_test_file(path, first)
        raise fail(str(path), "a test file is one YAML document; this one has "
                              f"{len(documents)}")
    return parse(documents[0], path)
