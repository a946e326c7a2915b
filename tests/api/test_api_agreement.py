"""The CRDs in the chart and the Python models describe the same API.

Two proofs: a structural walk comparing every schema node with the model field
it corresponds to (wire names, required-ness, types, enums, constraints, list
semantics), and a behavioural one that feeds hundreds of mutations of valid
samples to both and requires the same accept/reject verdict.
"""

import dataclasses
import datetime
import enum
from collections.abc import Mapping
from typing import Any

import apikit
import kubernetes_validate
import pytest

from clusterhealth_core.api import groups, wire

MODELS = apikit.MODELS


def openapi_schema(crd: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


_SCALAR_KEYWORDS = {
    "pattern": "pattern",
    "minLength": "min_length",
    "maxLength": "max_length",
    "minimum": "minimum",
    "maximum": "maximum",
}


def _compare_object(
    schema: dict[str, Any], cls: type[wire.Model], path: str, problems: list[str]
) -> None:
    where = path or "<root>"
    if schema.get("type") != "object":
        problems.append(f"{where}: CRD type {schema.get('type')!r}, model {cls.__name__}")
        return
    properties: dict[str, Any] = schema.get("properties", {})
    fields = wire.wire_fields(cls)
    if set(properties) != set(fields):
        problems.append(
            f"{where}: only in CRD {sorted(set(properties) - set(fields))}, "
            f"only in model {sorted(set(fields) - set(properties))}"
        )
    crd_required = set(schema.get("required", []))
    model_required = {name for name, field in fields.items() if wire.is_required(field)}
    if crd_required != model_required:
        problems.append(
            f"{where}: required CRD {sorted(crd_required)} model {sorted(model_required)}"
        )
    map_type = schema.get("x-kubernetes-map-type", "granular")
    if map_type != ("atomic" if cls.WIRE_ATOMIC else "granular"):
        problems.append(f"{where}: CRD map type {map_type}, model WIRE_ATOMIC {cls.WIRE_ATOMIC}")
    has_rules = "x-kubernetes-validations" in schema or "minProperties" in schema
    has_check = cls.check is not wire.Model.check
    if has_rules != has_check:
        problems.append(f"{where}: CRD cross-field rules {has_rules}, model check() {has_check}")
    hints = wire.type_hints(cls)
    for name in sorted(set(properties) & set(fields)):
        field = fields[name]
        sub = f"{path}.{name}" if path else name
        _compare_default(properties[name], field, sub, problems)
        _compare_value(properties[name], hints[field.name], field.metadata, sub, problems)


def _compare_default(
    schema: dict[str, Any], field: dataclasses.Field[Any], path: str, problems: list[str]
) -> None:
    """A CRD ``default`` is the model's default, declared with ``defaulted``."""
    if field.metadata.get("defaulted"):
        expected = wire.encoded_default(field)
        if "default" not in schema or schema["default"] != expected:
            problems.append(f"{path}: default CRD {schema.get('default')!r} model {expected!r}")
    elif "default" in schema:
        problems.append(f"{path}: CRD default {schema['default']!r}, model not defaulted")


def _compare_value(
    schema: dict[str, Any],
    tp: Any,
    field_meta: Mapping[str, Any],
    path: str,
    problems: list[str],
) -> None:
    tp, _ = wire.strip_optional(tp)
    origin = getattr(tp, "__origin__", None)
    if path == "metadata":
        if schema != {"type": "object"}:
            problems.append("metadata: the CRD may only say type: object")
        return
    if wire.is_raw_object(tp):
        raw = {k: v for k, v in schema.items() if k not in ("description", "nullable")}
        if raw != {"type": "object", "x-kubernetes-preserve-unknown-fields": True}:
            problems.append(f"{path}: model raw object, CRD {schema}")
        return
    if wire.is_int_or_string(tp):
        if schema.get("x-kubernetes-int-or-string") is not True or "type" in schema:
            problems.append(f"{path}: model int-or-string, CRD {schema}")
        _compare_scalar(schema, field_meta, path, problems)
        return
    if origin is tuple:
        if schema.get("type") != "array":
            problems.append(f"{path}: model list, CRD type {schema.get('type')!r}")
            return
        expected = {
            "minItems": field_meta.get("min_items"),
            "maxItems": field_meta.get("max_items"),
            "x-kubernetes-list-type": field_meta.get("list_type", "atomic"),
            "x-kubernetes-list-map-keys": list(field_meta.get("list_map_keys", ())) or None,
        }
        actual = {
            "minItems": schema.get("minItems"),
            "maxItems": schema.get("maxItems"),
            "x-kubernetes-list-type": schema.get("x-kubernetes-list-type", "atomic"),
            "x-kubernetes-list-map-keys": schema.get("x-kubernetes-list-map-keys"),
        }
        if expected != actual:
            problems.append(f"{path}: list semantics model {expected} CRD {actual}")
        _compare_value(schema["items"], tp.__args__[0], field_meta, f"{path}[]", problems)
        return
    if origin is not None and issubclass(origin, Mapping):
        extra = schema.get("additionalProperties")
        if schema.get("type") != "object" or not isinstance(extra, dict) or "properties" in schema:
            problems.append(f"{path}: model map, CRD {schema}")
            return
        _compare_value(extra, tp.__args__[1], field_meta, f"{path}{{}}", problems)
        return
    if isinstance(tp, type) and issubclass(tp, wire.Model):
        _compare_object(schema, tp, path, problems)
        return
    expected_type, expected_format, expected_enum = _scalar_shape(tp, field_meta)
    actual = (schema.get("type"), schema.get("format"), schema.get("enum"))
    if (expected_type, expected_format, expected_enum) != actual:
        problems.append(
            f"{path}: model {(expected_type, expected_format, expected_enum)} CRD {actual}"
        )
    _compare_scalar(schema, field_meta, path, problems)


def _scalar_shape(
    tp: Any, field_meta: Mapping[str, Any]
) -> tuple[str, str | None, list[str] | None]:
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "string", None, [str(member.value) for member in tp]
    if tp is str:
        return "string", None, None
    if tp is bool:
        return "boolean", None, None
    if tp is datetime.datetime:
        return "string", "date-time", None
    if tp is int:
        return "integer", field_meta.get("fmt"), None
    raise AssertionError(f"unexpected model type {tp!r}")


def _compare_scalar(
    schema: dict[str, Any], field_meta: Mapping[str, Any], path: str, problems: list[str]
) -> None:
    for keyword, option in _SCALAR_KEYWORDS.items():
        if schema.get(keyword) != field_meta.get(option):
            problems.append(
                f"{path}: {keyword} CRD {schema.get(keyword)!r} model {field_meta.get(option)!r}"
            )


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_schema_and_model_have_the_same_fields(
    kind: str, crd_docs: dict[str, dict[str, Any]]
) -> None:
    schema = openapi_schema(crd_docs[kind])
    problems: list[str] = []
    _compare_object(schema, MODELS[kind], "", problems)
    assert problems == []


def test_walk_detects_drift(crd_docs: dict[str, dict[str, Any]]) -> None:
    """The comparison is not vacuous: a renamed or relaxed field is reported."""
    schema = openapi_schema(crd_docs[groups.REMEDY.kind])
    spec = schema["properties"]["spec"]
    drifted = {
        **schema,
        "properties": {
            **schema["properties"],
            "spec": {
                **spec,
                "properties": {
                    **{k: v for k, v in spec["properties"].items() if k != "actions"},
                    "action": spec["properties"]["actions"],
                },
                "required": ["clusterAffinity"],
            },
        },
    }
    problems: list[str] = []
    _compare_object(drifted, MODELS[groups.REMEDY.kind], "", problems)
    assert any("only in CRD ['action']" in p for p in problems)
    assert any("required CRD ['clusterAffinity']" in p for p in problems)


def test_every_model_field_has_a_wire_name() -> None:
    seen: set[type] = set()
    stack: list[type] = list(MODELS.values())
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        assert dataclasses.is_dataclass(cls)
        params = cls.__dataclass_params__
        assert params.frozen, cls
        for name, field in wire.wire_fields(cls).items():
            assert name[0].islower() and "_" not in name, f"{cls.__name__}.{field.name}: {name}"
            tp, _ = wire.strip_optional(wire.type_hints(cls)[field.name])
            while getattr(tp, "__origin__", None) in (tuple,):
                tp = tp.__args__[0]
            if isinstance(tp, type) and issubclass(tp, wire.Model):
                stack.append(tp)
    assert len(seen) > 20


def _walk_schema(schema: dict[str, Any], path: str) -> list[tuple[str, dict[str, Any]]]:
    nodes = [(path, schema)]
    for name, sub in schema.get("properties", {}).items():
        nodes += _walk_schema(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        nodes += _walk_schema(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        nodes += _walk_schema(schema["additionalProperties"], f"{path}{{}}")
    return nodes


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_schema_is_strictly_typed_and_documented(
    kind: str, crd_docs: dict[str, dict[str, Any]]
) -> None:
    schema = openapi_schema(crd_docs[kind])
    for path, node in _walk_schema(schema, ""):
        raw = node.get("x-kubernetes-preserve-unknown-fields") is True
        if raw:  # only a raw object (the model field is wire.RawObject, see above)
            assert node["type"] == "object", path
            assert "properties" not in node and "additionalProperties" not in node, path
        else:
            assert "x-kubernetes-preserve-unknown-fields" not in node, path
        assert "type" in node or node.get("x-kubernetes-int-or-string"), path
        if node.get("type") == "object" and path != ".metadata" and not raw:
            assert "properties" in node or "additionalProperties" in node, path
    for path, node in _walk_schema(schema, ""):
        for name, sub in node.get("properties", {}).items():
            if f"{path}.{name}" != ".metadata":
                assert sub.get("description"), f"{path}.{name} has no description"


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_status_survives_server_side_apply_relinquishment(
    kind: str, crd_docs: dict[str, dict[str, Any]]
) -> None:
    """Optional granular objects and list-maps/sets under status are nullable.

    When a server-side-apply writer stops applying every child of such a node,
    Kubernetes before 1.36 (structured-merge-diff RemoveItems) stores null
    there; a non-nullable schema then rejects the writer's apply
    (kubernetes/kubernetes#117447, #103011).  Atomic lists and scalars are
    removed whole and are not affected.
    """
    missing: list[str] = []

    def visit(node: dict[str, Any], path: str, required: bool) -> None:
        granular = (
            node.get("type") == "object" and node.get("x-kubernetes-map-type") != "atomic"
        ) or node.get("x-kubernetes-list-type") in ("map", "set")
        if granular and not required and not node.get("nullable"):
            missing.append(path)
        for name, sub in node.get("properties", {}).items():
            visit(sub, f"{path}.{name}", name in node.get("required", []))
        if isinstance(node.get("items"), dict):
            visit(node["items"], f"{path}[]", True)

    properties = openapi_schema(crd_docs[kind])["properties"]
    if kind in WITHOUT_STATUS:
        assert "status" not in properties
        return
    visit(properties["status"], ".status", False)
    assert missing == []


WITHOUT_STATUS = {groups.CLUSTER_TAINT_POLICY.kind}
"""Kinds with no status (nor status subresource), like Karmada's."""

EXPECTED_NAMES = {
    groups.CLUSTER.kind: (groups.CLUSTER, "Cluster", "cluster", []),
    groups.REMEDY.kind: (groups.REMEDY, "Cluster", "remedy", []),
    groups.MCI.kind: (groups.MCI, "Namespaced", "multiclusteringress", [groups.MCI_SHORT_NAME]),
    groups.PROPAGATION_POLICY.kind: (groups.PROPAGATION_POLICY, "Namespaced",
                                     "propagationpolicy", [groups.PROPAGATION_POLICY_SHORT_NAME]),
    groups.CLUSTER_PROPAGATION_POLICY.kind: (
        groups.CLUSTER_PROPAGATION_POLICY, "Cluster", "clusterpropagationpolicy",
        [groups.CLUSTER_PROPAGATION_POLICY_SHORT_NAME]),
    groups.CLUSTER_TAINT_POLICY.kind: (groups.CLUSTER_TAINT_POLICY, "Cluster",
                                       "clustertaintpolicy", []),
    groups.RESOURCE_BINDING.kind: (groups.RESOURCE_BINDING, "Namespaced", "resourcebinding",
                                   [groups.RESOURCE_BINDING_SHORT_NAME]),
    groups.CLUSTER_RESOURCE_BINDING.kind: (
        groups.CLUSTER_RESOURCE_BINDING, "Cluster", "clusterresourcebinding",
        [groups.CLUSTER_RESOURCE_BINDING_SHORT_NAME]),
    groups.WORK.kind: (groups.WORK, "Namespaced", "work", [groups.WORK_SHORT_NAME]),
}

# Karmada's columns (CONFLICT-RESOLUTION, PRIORITY, ...), in the same order.
_POLICY_COLUMNS = [
    ("Conflict-Resolution", "string", ".spec.conflictResolution"),
    ("Priority", "integer", ".spec.priority"),
    ("Age", "date", ".metadata.creationTimestamp"),
]
_BINDING_COLUMNS = [
    ("Scheduled", "string", '.status.conditions[?(@.type=="Scheduled")].status'),
    ("FullyApplied", "string", '.status.conditions[?(@.type=="FullyApplied")].status'),
    ("Age", "date", ".metadata.creationTimestamp"),
]

# Title case as in built-in resources; kubectl prints them upper-cased
# (VERSION, MODE, READY, DNS, REMEDY-ACTIONS, AGE, ...).
EXPECTED_COLUMNS = {
    groups.CLUSTER.kind: [
        ("Version", "string", ".status.kubernetesVersion"),
        ("Mode", "string", ".spec.syncMode"),
        ("Ready", "string", '.status.conditions[?(@.type=="Ready")].status'),
        (
            "DNS",
            "string",
            '.status.conditions[?(@.type=="ServiceDomainNameResolutionReady")].status',
        ),
        ("Remedy-Actions", "string", ".status.remedyActions"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ],
    groups.REMEDY.kind: [
        ("Actions", "string", ".spec.actions"),
        ("Clusters", "string", ".spec.clusterAffinity.clusterNames"),
        ("Effective", "string", '.status.conditions[?(@.type=="Effective")].status'),
        ("Active", "integer", ".status.activeClusterCount"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ],
    groups.MCI.kind: [
        ("Class", "string", ".spec.ingressClassName"),
        ("Address", "string", ".status.loadBalancer.ingress[*].ip"),
        ("Blocked", "string", ".status.trafficBlockClusters"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ],
    groups.PROPAGATION_POLICY.kind: _POLICY_COLUMNS,
    groups.CLUSTER_PROPAGATION_POLICY.kind: _POLICY_COLUMNS,
    groups.CLUSTER_TAINT_POLICY.kind: [
        ("Taints", "string", ".spec.taints[*].key"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ],
    groups.RESOURCE_BINDING.kind: _BINDING_COLUMNS,
    groups.CLUSTER_RESOURCE_BINDING.kind: _BINDING_COLUMNS,
    groups.WORK.kind: [
        ("Workload-Kind", "string", ".spec.workload.manifests[*].kind"),
        ("Applied", "string", '.status.conditions[?(@.type=="Applied")].status'),
        ("Age", "date", ".metadata.creationTimestamp"),
    ],
}


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_crd_names_scope_and_columns(kind: str, crd_docs: dict[str, dict[str, Any]]) -> None:
    crd = crd_docs[kind]
    resource, scope, singular, short_names = EXPECTED_NAMES[kind]
    assert crd["metadata"]["name"] == resource.crd_name
    assert crd["spec"]["group"] == resource.group
    assert crd["spec"]["scope"] == scope
    assert (scope == "Namespaced") == resource.namespaced
    names = crd["spec"]["names"]
    assert names["kind"] == resource.kind
    assert names["listKind"] == f"{resource.kind}List"
    assert names["plural"] == resource.plural
    assert names["singular"] == singular
    assert names.get("shortNames", []) == short_names
    assert names["categories"] == list(groups.CATEGORIES)
    (version,) = crd["spec"]["versions"]
    assert version["name"] == resource.version
    assert version["served"] is True
    assert version["storage"] is True
    assert version.get("subresources") == (None if kind in WITHOUT_STATUS else {"status": {}})
    columns = [(c["name"], c["type"], c["jsonPath"]) for c in version["additionalPrinterColumns"]]
    assert columns == EXPECTED_COLUMNS[kind]


@pytest.mark.parametrize(
    ("namespaced", "cluster_scoped"),
    [
        (groups.PROPAGATION_POLICY.kind, groups.CLUSTER_PROPAGATION_POLICY.kind),
        (groups.RESOURCE_BINDING.kind, groups.CLUSTER_RESOURCE_BINDING.kind),
    ],
)
def test_cluster_scoped_twin_has_the_same_schema(
    namespaced: str, cluster_scoped: str, crd_docs: dict[str, dict[str, Any]]
) -> None:
    """The two files are kept in step by hand: only the top description may differ."""
    ours, twin = openapi_schema(crd_docs[namespaced]), openapi_schema(crd_docs[cluster_scoped])
    assert {**ours, "description": ""} == {**twin, "description": ""}
    first, second = (
        {k: v for k, v in crd_docs[kind]["spec"]["versions"][0].items() if k != "schema"}
        for kind in (namespaced, cluster_scoped)
    )
    assert first == second


def test_walk_detects_a_wrong_default_and_map_type(crd_docs: dict[str, dict[str, Any]]) -> None:
    schema = openapi_schema(crd_docs[groups.PROPAGATION_POLICY.kind])
    spec = schema["properties"]["spec"]
    selector = spec["properties"]["resourceSelectors"]["items"]["properties"]["labelSelector"]
    drifted = {
        **schema,
        "properties": {
            **schema["properties"],
            "spec": {
                **spec,
                "properties": {
                    **spec["properties"],
                    "conflictResolution": {**spec["properties"]["conflictResolution"],
                                           "default": "Overwrite"},
                    "propagateDeps": {**spec["properties"]["propagateDeps"], "default": False},
                    "resourceSelectors": {
                        **spec["properties"]["resourceSelectors"],
                        "items": {
                            **spec["properties"]["resourceSelectors"]["items"],
                            "properties": {
                                **spec["properties"]["resourceSelectors"]["items"]["properties"],
                                "labelSelector": {k: v for k, v in selector.items()
                                                  if k != "x-kubernetes-map-type"},
                            },
                        },
                    },
                },
            },
        },
    }
    problems: list[str] = []
    _compare_object(drifted, MODELS[groups.PROPAGATION_POLICY.kind], "", problems)
    assert any("spec.conflictResolution: default CRD 'Overwrite' model 'Abort'" in p
               for p in problems), problems
    assert any("spec.propagateDeps: CRD default False" in p for p in problems), problems
    assert any("labelSelector: CRD map type granular" in p for p in problems), problems


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_crd_document_is_a_valid_customresourcedefinition(
    kind: str, crd_docs: dict[str, dict[str, Any]]
) -> None:
    kubernetes_validate.validate(crd_docs[kind], "1.34.0", strict=True)


def test_model_and_crd_agree_on_every_mutation(mutation: Any, check_both: Any) -> None:
    model, crd = check_both(mutation.kind, mutation.obj)
    assert bool(model) == bool(crd), f"model: {model} / CRD: {crd}"
    if mutation.must_reject:
        assert model, "expected a rejection"


def test_there_are_enough_mutations(all_mutations: list[Any]) -> None:
    mutations = all_mutations
    assert len(mutations) > 300
    assert sum(m.must_reject for m in mutations) > 250
    assert {m.kind for m in mutations} == set(MODELS)


def test_samples_accepted_by_model_and_crd(sample: tuple[str, Any], check_both: Any) -> None:
    kind, obj = sample
    assert check_both(kind, obj) == ([], [])


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_samples_cover_every_schema_property(
    kind: str, crd_docs: dict[str, dict[str, Any]], samples: dict[str, list[Any]]
) -> None:
    schema = openapi_schema(crd_docs[kind])
    wanted = {path for path, _ in _walk_schema(schema, "") if path and not path.endswith("{}")}
    wanted = {path for path in wanted if not path.startswith(".metadata.")}
    seen: set[str] = set()

    def visit(node: Any, sub: dict[str, Any], path: str) -> None:
        seen.add(path)
        if isinstance(node, dict) and "properties" in sub:
            for key, value in node.items():
                visit(value, sub["properties"][key], f"{path}.{key}")
        elif isinstance(node, list) and "items" in sub:
            for item in node:
                visit(item, sub["items"], f"{path}[]")

    for obj in samples[kind]:
        visit(obj, schema, "")
    assert sorted(wanted - seen) == []
