"""Karmada's manifests fit our policy and work APIs, and ours fit Karmada's.

Two directions, without an API server (``tests/crds`` repeats the first on
real ones):

- Karmada's own example manifests (``tests/data/karmada_examples``, copied
  unchanged) are accepted by our models, our CRD schemas and Karmada
  v1.18.2's CRD schemas;
- whatever our CRD schema accepts, Karmada's accepts too: every maximal
  sample and every mutation of one that our schema accepts is checked against
  Karmada's CRD (the CRDs its installer ships, cached beside its binaries).
  Our policies' ``status`` (beyond Karmada) is left out of that comparison.
"""

import pathlib
from collections.abc import Callable
from typing import Any

import apikit
import pytest
import yaml

from clusterhealth_core.api import groups, policy, work

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "data" / "karmada_examples"

MODELS = {kind: model for kind, model in apikit.MODELS.items()
          if model.__module__ in (policy.__name__, work.__name__)}
"""Karmada's policy and work kinds (its examples have no Cluster, Remedy or MCI)."""

_BEYOND_KARMADA = {groups.PROPAGATION_POLICY.kind, groups.CLUSTER_PROPAGATION_POLICY.kind}
"""Kinds whose ``status`` is ours alone (Karmada's policies have none)."""

Validators = dict[str, Any]
Mutate = Callable[[dict[str, Any], Any], list[tuple[str, Any, bool]]]


def examples() -> list[tuple[str, dict[str, Any]]]:
    """(file name, manifest) of every example, in file order."""
    found = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if document:
                found.append((path.name, document))
    return found


def _as_karmada_sees_it(kind: str, obj: Any) -> Any:
    if kind in _BEYOND_KARMADA and isinstance(obj, dict):
        return {key: value for key, value in obj.items() if key != "status"}
    return obj


def test_every_kind_has_examples() -> None:
    kinds = {manifest["kind"] for _, manifest in examples()}
    assert kinds == set(MODELS)
    assert len(examples()) >= 15


@pytest.mark.parametrize(("name", "manifest"), examples(), ids=[name for name, _ in examples()])
def test_karmada_example_is_accepted_by_both(
    name: str, manifest: dict[str, Any], check_both: Any,
    karmada_validators: Validators,
) -> None:
    kind = manifest["kind"]
    assert check_both(kind, manifest) == ([], [])
    assert karmada_validators[kind].errors(manifest) == []
    model = MODELS[kind].from_dict(manifest, strict=True)
    assert MODELS[kind].from_dict(model.to_dict(), strict=True) == model


def test_maximal_samples_are_accepted_by_karmada(
    samples: dict[str, list[dict[str, Any]]], karmada_validators: Validators,
) -> None:
    for kind, validator in karmada_validators.items():
        for obj in samples[kind]:
            assert validator.errors(_as_karmada_sees_it(kind, obj)) == [], obj["metadata"]


def test_what_our_crd_accepts_karmada_s_accepts(
    all_mutations: list[Any], crd_validators: Validators,
    karmada_validators: Validators,
) -> None:
    """Our schema is as strict as Karmada's or stricter, never looser."""
    checked = 0
    looser: list[str] = []
    for mutation in all_mutations:
        if mutation.kind not in karmada_validators or mutation.name.endswith("=null"):
            continue  # null: the API server prunes it for a non-nullable field
        if mutation.kind in _BEYOND_KARMADA and ":status" in mutation.name:
            continue
        if crd_validators[mutation.kind].errors(mutation.obj):
            continue
        checked += 1
        obj = _as_karmada_sees_it(mutation.kind, mutation.obj)
        if karmada_validators[mutation.kind].errors(obj):
            looser.append(mutation.name)
    assert looser == []
    assert checked > 300


def test_what_our_crd_accepts_karmada_s_accepts_probed_by_karmada_s_schema(
    samples: dict[str, list[dict[str, Any]]], crd_validators: Validators,
    karmada_validators: Validators, schema_mutations: Mutate,
) -> None:
    """The same, with edits made from Karmada's schema (its enums, types and required fields)."""
    checked = 0
    looser: list[str] = []
    for kind, validator in karmada_validators.items():
        for obj in samples[kind]:
            seen = _as_karmada_sees_it(kind, obj)
            for name, mutated, _ in schema_mutations(validator.schema, seen):
                if name.endswith("=null") or crd_validators[kind].errors(mutated):
                    continue
                checked += 1
                if validator.errors(mutated):
                    looser.append(f"{kind}:{name}")
    assert looser == []
    assert checked > 300


def test_where_we_are_stricter_than_karmada_s_schema(
    samples: dict[str, list[dict[str, Any]]], check_both: Any,
    karmada_validators: Validators,
) -> None:
    """Values Karmada's schema takes but its webhook or controllers refuse: ours says so at once."""
    policy = samples[groups.PROPAGATION_POLICY.kind][0]
    placement = policy["spec"]["placement"]
    refused = [
        # Karmada's webhook: "unsupported key", "unsupported operator".
        {**placement, "clusterAffinity": {"fieldSelector": {"matchExpressions": [
            {"key": "name", "operator": "In", "values": ["x"]}]}}},
        {**placement, "clusterAffinity": {"fieldSelector": {"matchExpressions": [
            {"key": "region", "operator": "Exists"}]}}},
        # Karmada's webhook: "minGroups lower than 0 is not allowed".
        {**placement, "spreadConstraints": [{"spreadByField": "cluster", "minGroups": -1}]},
        # Kubernetes label selectors know four operators.
        {**placement, "clusterAffinity": {"labelSelector": {"matchExpressions": [
            {"key": "env", "operator": "Equals", "values": ["prod"]}]}}},
    ]
    for new_placement in refused:
        obj = {**policy, "spec": {**policy["spec"], "placement": new_placement}}
        model, crd = check_both(groups.PROPAGATION_POLICY.kind, obj)
        assert model and crd
        assert karmada_validators[groups.PROPAGATION_POLICY.kind].errors(
            _as_karmada_sees_it(groups.PROPAGATION_POLICY.kind, obj)) == []


def test_bad_cluster_taint_policies_are_refused_here_and_pass_karmada_s_schema(
    samples: dict[str, list[dict[str, Any]]], check_both: Any,
    karmada_validators: Validators,
) -> None:
    """What Karmada's webhook refuses or its controller ignores: our schema refuses at once."""
    kind = groups.CLUSTER_TAINT_POLICY.kind
    good = samples[kind][0]
    spec = good["spec"]
    condition = spec["addOnConditions"][0]
    refused = {
        "an effect Karmada does not act on": {
            **spec, "taints": [{"key": "dns", "effect": "NoEvict"}]},
        "a preferred effect": {**spec, "taints": [{"key": "dns", "effect": "PreferNoSchedule"}]},
        # Karmada's webhook: "taint(dns:NoExecute) already exist".
        "the same taint twice": {**spec, "taints": [{"key": "dns", "effect": "NoExecute"},
                                                    {"key": "dns", "effect": "NoExecute",
                                                     "value": "x"}]},
        # Karmada's controller logs "unsupported MatchCondition operator" and never matches.
        "an unknown operator": {**spec, "addOnConditions": [{**condition, "operator": "Equal"}]},
        "a status that is no condition status": {
            **spec, "addOnConditions": [{**condition, "statusValues": ["false"]}]},
        # Neither list: the policy can never add or remove anything.
        "no conditions": {k: v for k, v in spec.items()
                          if k not in ("addOnConditions", "removeOnConditions")},
        "empty conditions": {**spec, "addOnConditions": [], "removeOnConditions": []},
    }
    for why, bad_spec in refused.items():
        obj = {**good, "spec": bad_spec}
        model, crd = check_both(kind, obj)
        assert model and crd, why
        assert karmada_validators[kind].errors(obj) == [], why
    model, crd = check_both(kind, {**good, "spec": refused["no conditions"]})
    assert "addOnConditions or removeOnConditions" in model[0]
    assert "addOnConditions or removeOnConditions" in crd[0]
