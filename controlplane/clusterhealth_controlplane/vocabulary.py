"""The control plane's vocabulary: the names, labels, finalizers and references it shares.

Every controller of the control plane speaks it, as Karmada's keep
``pkg/util/names`` and ``well_known_constants.go``.

They used to live in the binding controller's decision module, which nine modules
outside the binding controller imported for them.  Pure: no I/O, table-tested.

* where Works live (``karmada-es-<cluster>``) and how Works and bindings are named;
* the labels and annotations linking a Work and its manifest to their binding
  (and a member object to its Work: :func:`work_of`);
* the execution finalizer;
* :class:`BindingRef`, which binding (RB or CRB) an object is about (the
  lookup of one in the two binding caches is ``manager.Bindings.get``);
* :func:`keep_transition`, a condition's ``lastTransitionTime`` kept while its
  status stays; wire time is :mod:`clusterhealth_controlplane.wiretime`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

# the binding's and the Work's condition types, and a member object's health in
# aggregatedStatus (Karmada's spellings; core's api.groups and api.work have them too, but
# the pure decision modules may not import the core's API package, which reaches kube)
SCHEDULED = "Scheduled"
FULLY_APPLIED = "FullyApplied"
APPLIED = "Applied"
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
UNKNOWN = "Unknown"

EXECUTION_SPACE_PREFIX = "karmada-es-"
EXECUTION_FINALIZER = "karmada.io/execution-controller"
"""Karmada's finalizer on a Work: the member objects go before the Work does."""

# links back to the binding (Karmada's keys, pkg/apis/work/v1alpha2/well_known_constants.go)
RB_ID = "resourcebinding.karmada.io/permanent-id"
CRB_ID = "clusterresourcebinding.karmada.io/permanent-id"
RB_NAMESPACE = "resourcebinding.karmada.io/namespace"
RB_NAME = "resourcebinding.karmada.io/name"
CRB_NAME = "clusterresourcebinding.karmada.io/name"
WORK_NAMESPACE = "work.karmada.io/namespace"
WORK_NAME = "work.karmada.io/name"
TEMPLATE_UID = "resourcetemplate.karmada.io/uid"
TEMPLATE_GENERATION = "resourcetemplate.karmada.io/generation"
CONFLICT_RESOLUTION = "work.karmada.io/conflict-resolution"
"""On a Work and on its manifest: ``overwrite`` or ``abort``, what the execution controller does
with a member object of the same name that this Work did not create (Karmada's values)."""
OVERWRITE = "overwrite"
ABORT = "abort"
MANAGED = "karmada.io/managed"
"""Label on every object the execution controller applies in a member (value ``"true"``)."""

_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
"""k8s.io/apimachinery's ``rand.SafeEncodeString`` alphabet."""


RESERVED_NAMESPACES = ("karmada-system", "karmada-cluster", EXECUTION_SPACE_PREFIX)
"""Karmada's own namespaces (``karmada-es-*`` by prefix) and ``kube-*``: never propagated."""


def reserved(namespace: str | None) -> bool:
    """Whether ``namespace`` is one the control plane keeps for itself (never propagated)."""
    if not namespace:
        return False
    return (namespace in RESERVED_NAMESPACES[:2] or namespace.startswith(RESERVED_NAMESPACES[2])
            or namespace.startswith("kube-"))


def work_of(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(namespace, name)`` of the Work a member object was applied from."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    namespace = annotations.get(WORK_NAMESPACE)
    name = annotations.get(WORK_NAME)
    return (str(namespace), str(name)) if namespace and name else None


def execution_namespace(cluster: str) -> str:
    """``karmada-es-<cluster>``: where the Works for ``cluster`` live."""
    return EXECUTION_SPACE_PREFIX + cluster


def cluster_of(namespace: str) -> str | None:
    """The cluster an execution namespace is for (None: not an execution namespace)."""
    if not namespace.startswith(EXECUTION_SPACE_PREFIX):
        return None
    return namespace[len(EXECUTION_SPACE_PREFIX):] or None


def _fnv32a(text: str) -> int:
    value = 0x811C9DC5
    for byte in text.encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def work_name(kind: str, name: str, namespace: str | None) -> str:
    """Karmada's ``names.GenerateWorkName(kind, name, namespace)``."""
    name = name.replace(":", ".").lower()
    full = f"{namespace}-{name}-{kind}" if namespace else f"{name}-{kind}"
    digits = str(_fnv32a(full.lower()))
    return f"{name}-{''.join(_ALPHANUMS[ord(c) % len(_ALPHANUMS)] for c in digits)}"


def binding_name(kind: str, name: str) -> str:
    """Karmada's binding name for a template (``names.GenerateBindingName``)."""
    return f"{name.replace(':', '.')}-{kind}".lower()


@dataclasses.dataclass(frozen=True)
class BindingRef:
    """Which binding a Work belongs to: kind (RB or CRB), namespace ("" for CRB), name."""

    cluster_scoped: bool
    namespace: str
    name: str

    @property
    def key(self) -> str:
        """The binding controller's queue key."""
        return f"{'CRB' if self.cluster_scoped else 'RB'}|{self.namespace}|{self.name}"

    @classmethod
    def parse(cls, key: str) -> BindingRef:
        """The inverse of :attr:`key`."""
        kind, namespace, name = key.split("|")
        return cls(kind == "CRB", namespace, name)

    @classmethod
    def at(cls, namespace: str, name: str) -> BindingRef:
        """The ref of the binding at ``namespace``/``name`` (no namespace: a cluster binding)."""
        return cls(not namespace, namespace, name)

    @classmethod
    def of(cls, binding: Mapping[str, Any]) -> BindingRef:
        """The ref of a binding object (no namespace: a ClusterResourceBinding)."""
        meta = binding.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        return cls(not namespace, namespace, str(meta.get("name")))


def binding_of_work(work: Mapping[str, Any]) -> BindingRef | None:
    """The binding a Work was made for, from Karmada's annotations (None: not a binding's)."""
    annotations = (work.get("metadata") or {}).get("annotations") or {}
    if annotations.get(RB_NAME) and annotations.get(RB_NAMESPACE):
        return BindingRef(False, str(annotations[RB_NAMESPACE]), str(annotations[RB_NAME]))
    if annotations.get(CRB_NAME):
        return BindingRef(True, "", str(annotations[CRB_NAME]))
    return None




def keep_transition(condition: Mapping[str, Any], current: Iterable[Mapping[str, Any]]
                    ) -> dict[str, Any]:
    """``condition`` with the live one's ``lastTransitionTime`` when its status is unchanged."""
    for entry in current:
        if entry.get("type") == condition.get("type") \
                and entry.get("status") == condition.get("status") \
                and entry.get("lastTransitionTime"):
            return {**condition, "lastTransitionTime": entry["lastTransitionTime"]}
    return dict(condition)
