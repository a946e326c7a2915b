"""The control plane's vocabulary: binding lookup (``manager.Bindings``), kept transition times."""

from __future__ import annotations

import types
from typing import Any, cast

import pytest

from clusterhealth_controlplane import manager, vocabulary
from clusterhealth_core import builder, runner
from clusterhealth_core.kube import resources

BINDINGS = {"ns/web": {"metadata": {"name": "web", "namespace": "ns"}}}
CLUSTER_BINDINGS = {"all": {"metadata": {"name": "all"}}}


@pytest.mark.parametrize(("ref", "found"), [
    (vocabulary.BindingRef.at("ns", "web"), BINDINGS["ns/web"]),
    (vocabulary.BindingRef.at("", "all"), CLUSTER_BINDINGS["all"]),
    (vocabulary.BindingRef.at("ns", "all"), None),
    (vocabulary.BindingRef.at("", "web"), None),
])
def test_a_binding_is_looked_up_in_the_cache_of_its_kind(
        ref: vocabulary.BindingRef, found: dict[str, Any] | None) -> None:
    stores = {resources.RESOURCE_BINDINGS: BINDINGS,
              resources.CLUSTER_RESOURCE_BINDINGS: CLUSTER_BINDINGS}
    informers = types.SimpleNamespace(
        informer=lambda resource: types.SimpleNamespace(store=stores[resource]))
    bindings = manager.Bindings(cast(runner.Term, types.SimpleNamespace(informers=informers)))
    assert bindings.get(ref) == found
    assert bindings.get(builder.Request(ref.namespace, ref.name)) == found
    assert vocabulary.BindingRef.parse(ref.key) == ref
    assert list(bindings.objects()) == [BINDINGS["ns/web"], CLUSTER_BINDINGS["all"]]


WANTED = {"type": "Applied", "status": "True", "lastTransitionTime": "2026-01-02T00:00:00Z"}


@pytest.mark.parametrize(("current", "since"), [
    ([], "2026-01-02T00:00:00Z"),  # new: now
    ([{"type": "Applied", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"}],
     "2025-01-01T00:00:00Z"),  # unchanged status: kept
    ([{"type": "Applied", "status": "False", "lastTransitionTime": "2025-01-01T00:00:00Z"}],
     "2026-01-02T00:00:00Z"),  # a transition: now
    ([{"type": "Other", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"}],
     "2026-01-02T00:00:00Z"),  # another condition
    ([{"type": "Applied", "status": "True"}], "2026-01-02T00:00:00Z"),  # none to keep
])
def test_the_transition_time_is_kept_while_the_status_stays(
        current: list[dict[str, Any]], since: str) -> None:
    assert vocabulary.keep_transition(WANTED, current)["lastTransitionTime"] == since
