"""Which policy claims a resource template, and the binding it gets: pure, table-tested.

Karmada's rules, as its detector applies them:

* A template is matched by a policy when one of the policy's
  ``resourceSelectors`` selects it: same apiVersion and kind; the namespace,
  when the selector names one (a PropagationPolicy only ever selects in its
  own namespace); then the name, else the label selector, else nothing more.
  The selector that matched gives the *implicit* priority: by name (3) over
  by label selector (2) over by kind alone (1).
* Among the matching policies a PropagationPolicy beats a
  ClusterPropagationPolicy; then the higher ``spec.priority``; then the
  higher implicit priority; then the name, alphabetically.
* A claimed template stays with its policy while that policy exists and
  still selects it, unless a better policy may preempt it
  (``spec.preemption: Always``): a PropagationPolicy preempts a
  ClusterPropagationPolicy, and a policy of the same kind preempts one of
  lower ``spec.priority``.
* Templates in the namespaces Karmada reserves are never propagated.

The binding (``<name>-<kind>``, lower case) carries the template's reference
(with its ``resourceVersion``, so that a changed template changes its binding
and the binding controller re-renders its Works), its replicas and per-replica
requirements, and the policy's placement.
"""

from __future__ import annotations

import dataclasses
import fractions
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from clusterhealth_controlplane import quantities, vocabulary
from clusterhealth_controlplane.binding import decision as binding
from clusterhealth_core.api import policy

PP = "PropagationPolicy"
CPP = "ClusterPropagationPolicy"

# the claim, on the template and on its binding (Karmada's keys)
PP_NAME = "propagationpolicy.karmada.io/name"
PP_NAMESPACE = "propagationpolicy.karmada.io/namespace"
PP_ID = "propagationpolicy.karmada.io/permanent-id"
CPP_NAME = "clusterpropagationpolicy.karmada.io/name"
CPP_ID = "clusterpropagationpolicy.karmada.io/permanent-id"

CONDITION_SELECTED = "ResourcesSelected"
"""A policy's condition (beyond Karmada): whether it claims any resource template."""
REASON_SELECTED = "Selected"
REASON_NO_MATCH = "NoMatchingResource"
REASON_UNREADABLE = "KindNotReadable"
"""A selected kind the controller manager may not read (RBAC) or cannot list: its
templates are neither seen nor propagated until that changes."""

PRIORITY_NAME = 3
PRIORITY_LABELS = 2
PRIORITY_KIND = 1

RESERVED_NAMESPACES = vocabulary.RESERVED_NAMESPACES
reserved = vocabulary.reserved


@dataclasses.dataclass(frozen=True)
class Policy:
    """A PropagationPolicy or ClusterPropagationPolicy as the detector sees it."""

    kind: str
    namespace: str | None
    name: str
    uid: str
    spec: policy.PropagationSpec

    @property
    def key(self) -> str:
        """``PropagationPolicy/ns/name`` or ``ClusterPropagationPolicy/name``."""
        return f"{self.kind}/{self.namespace}/{self.name}" if self.namespace \
            else f"{self.kind}/{self.name}"


@dataclasses.dataclass(frozen=True)
class Claim:
    """Which policy a template (or binding) is claimed by, from its labels and annotations."""

    kind: str
    namespace: str | None
    name: str


def labels_match(selector: policy.LabelSelector, labels: Mapping[str, str]) -> bool:
    """Kubernetes label-selector semantics (an empty selector matches everything)."""
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            return False
    for requirement in selector.match_expressions:
        operator = requirement.operator.value
        present = requirement.key in labels
        if operator == "In" and not (present and labels[requirement.key] in requirement.values):
            return False
        if operator == "NotIn" and present and labels[requirement.key] in requirement.values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def selector_priority(selector: policy.ResourceSelector, obj: Mapping[str, Any],
                      policy_namespace: str | None) -> int:
    """How specifically ``selector`` selects ``obj``: 3 by name, 2 by labels, 1 by kind, 0 not."""
    meta = obj.get("metadata") or {}
    if selector.api_version != obj.get("apiVersion") or selector.kind != obj.get("kind"):
        return 0
    namespace = meta.get("namespace")
    wanted_namespace = policy_namespace or selector.namespace
    if wanted_namespace and namespace != wanted_namespace:
        return 0
    if selector.name:
        return PRIORITY_NAME if selector.name == meta.get("name") else 0
    if selector.label_selector is not None:
        return PRIORITY_LABELS if labels_match(selector.label_selector,
                                               meta.get("labels") or {}) else 0
    return PRIORITY_KIND


def implicit_priority(candidate: Policy, obj: Mapping[str, Any]) -> int:
    """The best priority among the policy's selectors for ``obj`` (0: not selected)."""
    return max((selector_priority(s, obj, candidate.namespace)
                for s in candidate.spec.resource_selectors), default=0)


def _rank(candidate: Policy, obj: Mapping[str, Any]) -> tuple[int, int, int]:
    return (1 if candidate.kind == PP else 0, candidate.spec.priority,
            implicit_priority(candidate, obj))


def best_policy(obj: Mapping[str, Any], candidates: Iterable[Policy]) -> Policy | None:
    """The policy that should claim ``obj`` among ``candidates`` (None: none selects it)."""
    matching = [c for c in candidates if implicit_priority(c, obj) > 0
                and (c.kind == CPP or c.namespace == (obj.get("metadata") or {}).get("namespace"))]
    if not matching:
        return None
    # highest rank first, then the name alphabetically
    return min(matching, key=lambda c: (tuple(-v for v in _rank(c, obj)), c.name))


def claim_of(obj: Mapping[str, Any]) -> Claim | None:
    """The policy ``obj`` is claimed by, from Karmada's annotations (or labels)."""
    meta = obj.get("metadata") or {}
    marks = {**(meta.get("labels") or {}), **(meta.get("annotations") or {})}
    if marks.get(PP_NAME):
        return Claim(PP, marks.get(PP_NAMESPACE) or meta.get("namespace"), marks[PP_NAME])
    if marks.get(CPP_NAME):
        return Claim(CPP, None, marks[CPP_NAME])
    return None


def _preempts(better: Policy, current: Policy) -> bool:
    if better.spec.preemption != policy.PreemptionBehavior.ALWAYS:
        return False
    if better.kind == PP and current.kind == CPP:
        return True
    return better.kind == current.kind and better.spec.priority > current.spec.priority


def choose(obj: Mapping[str, Any], candidates: Sequence[Policy]) -> Policy | None:
    """The policy that claims ``obj`` now: its current claimant, unless gone or preempted."""
    meta = obj.get("metadata") or {}
    if reserved(meta.get("namespace")):
        return None
    best = best_policy(obj, candidates)
    claim = claim_of(obj)
    if claim is None:
        return best
    current = next((c for c in candidates if c.kind == claim.kind and c.name == claim.name
                    and (c.namespace or None) == (claim.namespace if claim.kind == PP else None)),
                   None)
    if current is None or implicit_priority(current, obj) == 0:
        return best
    if best is not None and best is not current and _preempts(best, current):
        return best
    return current


def claim_marks(chosen: Policy) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations that record ``chosen``'s claim (Karmada's keys)."""
    if chosen.kind == PP:
        return ({PP_ID: chosen.uid},
                {PP_NAME: chosen.name, PP_NAMESPACE: chosen.namespace or ""})
    return {CPP_ID: chosen.uid}, {CPP_NAME: chosen.name}


def _quantity_sum(values: Iterable[str]) -> str | None:
    """Sum CPU or memory quantities, exactly; in milli-units when one was written so."""
    texts = list(values)
    if not texts:
        return None
    total = sum((quantities.parse(text) for text in texts), fractions.Fraction(0))
    if any(text.endswith("m") for text in texts):
        return f"{math.ceil(total * 1000)}m"
    return quantities.plain(total)


def replica_requirements(obj: Mapping[str, Any]) -> tuple[int, dict[str, Any] | None]:
    """``(replicas, replicaRequirements)`` of a template, as Karmada's default interpreter.

    Deployments, StatefulSets and ReplicaSets: ``spec.replicas`` (default 1)
    and, per replica, the sum of the containers' requests and the pod's
    node claim (node selector, tolerations, required node affinity).  Other
    kinds: no replicas.
    """
    if not binding.has_replicas(obj):
        return 0, None
    spec = obj.get("spec") or {}
    replicas = spec.get("replicas")
    replicas = 1 if replicas is None else int(replicas)
    pod = ((spec.get("template") or {}).get("spec")) or {}
    requests: dict[str, list[str]] = {}
    for container in pod.get("containers") or []:
        for resource, quantity in ((container.get("resources") or {}).get("requests")
                                   or {}).items():
            requests.setdefault(resource, []).append(str(quantity))
    summed = {k: v for k, v in ((k, _quantity_sum(q)) for k, q in requests.items())
              if v is not None}
    requirements: dict[str, Any] = {}
    if summed:
        requirements["resourceRequest"] = dict(sorted(summed.items()))
    claim: dict[str, Any] = {}
    if pod.get("nodeSelector"):
        claim["nodeSelector"] = dict(pod["nodeSelector"])
    if pod.get("tolerations"):
        claim["tolerations"] = list(pod["tolerations"])
    required = ((pod.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    if required:
        claim["hardNodeAffinity"] = required
    if claim:
        requirements["nodeClaim"] = claim
    if pod.get("priorityClassName"):
        requirements["priorityClassName"] = pod["priorityClassName"]
    if requirements:
        namespace = (obj.get("metadata") or {}).get("namespace")
        if namespace:
            requirements["namespace"] = namespace
    return replicas, requirements or None


def binding_spec(obj: Mapping[str, Any], chosen: Policy) -> dict[str, Any]:
    """The binding fields the detector owns, in wire shape."""
    meta = obj.get("metadata") or {}
    reference: dict[str, Any] = {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
                                 "name": meta["name"]}
    for key, wire_key in (("namespace", "namespace"), ("uid", "uid"),
                          ("resourceVersion", "resourceVersion")):
        if meta.get(key):
            reference[wire_key] = meta[key]
    replicas, requirements = replica_requirements(obj)
    spec: dict[str, Any] = {"resource": reference,
                            "placement": chosen.spec.placement.to_dict(),
                            "propagateDeps": chosen.spec.propagate_deps,
                            "conflictResolution": chosen.spec.conflict_resolution.value,
                            "schedulerName": chosen.spec.scheduler_name}
    if replicas:
        spec["replicas"] = replicas
    if requirements:
        spec["replicaRequirements"] = requirements
    if chosen.spec.failover is not None:
        spec["failover"] = chosen.spec.failover.to_dict()
    return spec


def describe_selector(selector: policy.ResourceSelector) -> str:
    """``Deployment apps/v1 name=nginx`` (or ``labels=...``, or the kind alone)."""
    text = f"{selector.kind} {selector.api_version}"
    if selector.namespace:
        text += f" namespace={selector.namespace}"
    if selector.name:
        text += f" name={selector.name}"
    elif selector.label_selector is not None:
        text += " labels=" + ",".join(
            [f"{k}={v}" for k, v in sorted(selector.label_selector.match_labels.items())]
            + [f"{r.key} {r.operator.value} {list(r.values)}"
               for r in selector.label_selector.match_expressions])
    return text


def selection_verdict(candidate: Policy, claimed: Sequence[str],
                      unserved: Sequence[str] = (),
                      unreadable: Mapping[str, str] | None = None) -> tuple[bool, str, str]:
    """The policy's ``ResourcesSelected`` condition: ``(ok, reason, message)``.

    ``unserved``: the selected kinds (``Widget example.com/v1``) this API server
    does not serve, named in the message so that a typo in a selector shows.
    ``unreadable``: selected kinds the controller manager cannot list, with the
    reason (a Forbidden answer: the kind is not among the chart's ``templateKinds``);
    any of them makes the condition False, whatever else the policy claims.
    """
    missing = (f"; not served by this API server: {', '.join(sorted(unserved))}"
               if unserved else "")
    claims = ""
    if claimed:
        shown = ", ".join(sorted(claimed)[:10])
        more = f" and {len(claimed) - 10} more" if len(claimed) > 10 else ""
        claims = f"claims {len(claimed)} resource template(s): {shown}{more}"
    if unreadable:
        kinds = "; ".join(f"{kind} ({why})" for kind, why in sorted(unreadable.items()))
        return (False, REASON_UNREADABLE,
                f"{claims + '; ' if claims else ''}the controller manager cannot read "
                f"{kinds}: nothing of {'these kinds' if len(unreadable) > 1 else 'this kind'} "
                "is propagated (an operator adds it to the chart's templateKinds){missing}")
    if claimed:
        return True, REASON_SELECTED, f"{claims}{missing}"
    where = f" in namespace {candidate.namespace}" if candidate.namespace else ""
    selectors = "; ".join(describe_selector(s) for s in candidate.spec.resource_selectors)
    return (False, REASON_NO_MATCH,
            f"no resource template{where} is claimed by this policy: none matches its "
            f"resourceSelectors ({selectors}), or another policy claims them{missing}")
