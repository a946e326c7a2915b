"""What the default-tolerations webhook answers: an AdmissionReview in, one out. Pure.

For a CREATE or UPDATE of a PropagationPolicy or ClusterPropagationPolicy
(``policy.karmada.io``), :func:`admit` adds to ``spec.placement.clusterTolerations``
a NoExecute toleration for each of ``cluster.karmada.io/not-ready`` and
``cluster.karmada.io/unreachable`` (operator Exists, ``tolerationSeconds`` from the
flags, 300 each) *for a key the policy does not already tolerate*, as a JSON Patch
that only appends: the policy's own tolerations are never changed or reordered.

**"Already tolerates"** means: one of the policy's tolerations tolerates the NoExecute
taint of that key (Kubernetes' ``ToleratesTaint``: an empty key with Exists tolerates
every key, an empty effect every effect). Karmada (1.14 and before; the flags were
removed in 1.15, with the NoExecute taints they were for) matched instead on the exact
``(key, effect, operator, value)`` of the default, so a policy tolerating
``not-ready`` for every effect, forever, got a second, 300 s toleration of the same
taint; here it keeps only its own.

**Input that cannot be read** is answered in two ways, on purpose:

- a body that is not an ``admission.k8s.io/v1`` AdmissionReview with a request and a
  uid: :class:`InvalidReview`, which the server answers with HTTP 400. Only a client
  that is not the API server sends that; the API server treats a non-200 answer as a
  failed call and applies the configuration's ``failurePolicy``.
- a real review whose object does not have the policy's shape where the webhook looks
  (``spec``, ``placement`` not objects, ``clusterTolerations`` not a list of
  tolerations): **allowed, unchanged, with a warning** (``kubectl`` prints it). The
  API server then validates the object against the CRD's schema and refuses it with
  its own message, listing every field error, not just the first one the webhook met;
  and the webhook never refuses an object the API server's schema accepts.

Requests for other kinds, other operations or a subresource are allowed unchanged
(the MutatingWebhookConfiguration does not send them; a mistaken one must not break
writes). Results are counted by :data:`RESULTS`.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from clusterhealth_controlplane.scheduler import adapt, framework
from clusterhealth_core.api import groups, policy, wire

API_VERSION = "admission.k8s.io/v1"
KINDS = (groups.PROPAGATION_POLICY.kind, groups.CLUSTER_PROPAGATION_POLICY.kind)
OPERATIONS = ("CREATE", "UPDATE")
NO_EXECUTE = "NoExecute"
WARNING_PREFIX = "clusterhealth-webhook: no default tolerations added"

MUTATED = "mutated"
UNCHANGED = "unchanged"
IGNORED = "ignored"
MALFORMED = "malformed"
INVALID = "invalid"
TOO_LARGE = "too_large"
RESULTS = (MUTATED, UNCHANGED, IGNORED, MALFORMED, INVALID, TOO_LARGE)
"""mutated: tolerations added; unchanged: the policy tolerates both keys already;
ignored: not a policy CREATE/UPDATE; malformed: the policy's fields cannot be read
(allowed, warned); invalid: not an AdmissionReview (HTTP 400); too_large: a body over the
size limit, never read (HTTP 413)."""


class InvalidReview(ValueError):
    """The body is not an ``admission.k8s.io/v1`` AdmissionReview request."""


@dataclasses.dataclass(frozen=True)
class Defaults:
    """The ``tolerationSeconds`` of the tolerations added, per taint key."""

    not_ready_seconds: int = 300
    unreachable_seconds: int = 300

    def tolerations(self) -> tuple[dict[str, Any], ...]:
        """The default tolerations, in the order they are added (as Karmada did)."""
        return tuple(
            {"key": key, "operator": "Exists", "effect": NO_EXECUTE, "tolerationSeconds": seconds}
            for key, seconds in ((groups.TAINT_CLUSTER_NOT_READY, self.not_ready_seconds),
                                 (groups.TAINT_CLUSTER_UNREACHABLE, self.unreachable_seconds)))


@dataclasses.dataclass(frozen=True)
class Request:
    """The parts of an AdmissionRequest the decision reads."""

    uid: str
    kind: str
    """``request.kind.kind`` when its group is ``policy.karmada.io``, else ``""``."""
    operation: str
    sub_resource: str
    object: object


@dataclasses.dataclass(frozen=True)
class Decision:
    """The answer to one request: always allowed; a patch and warnings, maybe."""

    result: str
    patch: tuple[dict[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()


class _Malformed(ValueError):
    pass


def parse_review(body: bytes) -> Request:
    """The request of an AdmissionReview body, or :class:`InvalidReview` saying why not."""
    try:
        review = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidReview(f"the body is not JSON: {exc}") from None
    if not isinstance(review, dict):
        raise InvalidReview("the body is not a JSON object")
    if review.get("apiVersion") != API_VERSION or review.get("kind") != "AdmissionReview":
        raise InvalidReview(f"expected an {API_VERSION} AdmissionReview, got apiVersion "
                            f"{review.get('apiVersion')!r} kind {review.get('kind')!r}")
    request = review.get("request")
    if not isinstance(request, dict):
        raise InvalidReview("the AdmissionReview has no request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise InvalidReview("the AdmissionReview request has no uid")
    kind = request.get("kind")
    kind_name = ""
    if isinstance(kind, dict) and kind.get("group") == groups.POLICY_GROUP:
        kind_name = str(kind.get("kind") or "")
    return Request(uid=uid, kind=kind_name, operation=str(request.get("operation") or ""),
                   sub_resource=str(request.get("subResource") or ""),
                   object=request.get("object"))


def decide(request: Request, defaults: Defaults) -> Decision:
    """The patch adding the default tolerations ``request``'s policy lacks."""
    if request.kind not in KINDS or request.operation not in OPERATIONS \
            or request.sub_resource:
        return Decision(IGNORED)
    try:
        patch = _patch(request.object, defaults)
    except _Malformed as exc:
        return Decision(MALFORMED, warnings=(f"{WARNING_PREFIX}: {exc}",))
    return Decision(MUTATED if patch else UNCHANGED, patch=patch)


def _object(value: object, path: str) -> Mapping[str, Any] | None:
    """``value`` if an object, ``None`` if absent or null, else :class:`_Malformed`."""
    if value is None or isinstance(value, dict):
        return value
    raise _Malformed(f"{path} is not an object")


def _patch(obj: object, defaults: Defaults) -> tuple[dict[str, Any], ...]:
    if not isinstance(obj, dict):
        raise _Malformed("the request has no object")
    spec = _object(obj.get("spec"), "spec")
    placement = None if spec is None else _object(spec.get("placement"), "spec.placement")
    raw = None if placement is None else placement.get("clusterTolerations")
    if raw is not None and not isinstance(raw, list):
        raise _Malformed("spec.placement.clusterTolerations is not a list")
    own = _tolerations(raw or [])
    missing = [t for t in defaults.tolerations()
               if not any(o.tolerates(framework.Taint(key=t["key"], effect=NO_EXECUTE))
                          for o in own)]
    if not missing:
        return ()
    if spec is None:
        return ({"op": "add", "path": "/spec",
                 "value": {"placement": {"clusterTolerations": missing}}},)
    if placement is None:
        return ({"op": "add", "path": "/spec/placement",
                 "value": {"clusterTolerations": missing}},)
    if raw is None:  # absent or null: "add" sets an existing member (RFC 6902 4.1)
        return ({"op": "add", "path": "/spec/placement/clusterTolerations",
                 "value": missing},)
    return tuple({"op": "add", "path": "/spec/placement/clusterTolerations/-", "value": t}
                 for t in missing)


def _tolerations(raw: Sequence[object]) -> list[framework.Toleration]:
    views = []
    for index, item in enumerate(raw):
        path = f"spec.placement.clusterTolerations[{index}]"
        if not isinstance(item, dict):
            raise _Malformed(f"{path} is not an object")
        try:
            views.append(adapt.toleration(policy.Toleration.from_dict(item)))
        except wire.ValidationError as exc:
            raise _Malformed(f"{path}: {exc}") from None
    return views


def response(request_uid: str, decision: Decision) -> dict[str, Any]:
    """The AdmissionReview answering ``request_uid`` with ``decision``."""
    answer: dict[str, Any] = {"uid": request_uid, "allowed": True}
    if decision.patch:
        answer["patchType"] = "JSONPatch"
        answer["patch"] = base64.b64encode(
            json.dumps(list(decision.patch), separators=(",", ":")).encode()).decode()
    if decision.warnings:
        answer["warnings"] = list(decision.warnings)
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": answer}


def admit(body: bytes, defaults: Defaults) -> tuple[dict[str, Any], Request, Decision]:
    """Parse, decide and answer one review (:class:`InvalidReview` if it is none)."""
    request = parse_review(body)
    decision = decide(request, defaults)
    return response(request.uid, decision), request, decision
