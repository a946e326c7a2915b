"""Condition helpers and RFC 3339 times."""

import dataclasses
import datetime

import pytest

from clusterhealth_core.api import groups, meta

T0 = datetime.datetime(2024, 1, 25, 4, 5, 57, tzinfo=datetime.UTC)
T1 = T0 + datetime.timedelta(seconds=30)
T2 = T0 + datetime.timedelta(minutes=5)


def _condition(
    type_: str, status: meta.ConditionStatus, at: datetime.datetime, reason: str = "Probe"
) -> meta.Condition:
    return meta.Condition(
        type=type_, status=status, last_transition_time=at, reason=reason, message=reason
    )


READY = _condition(groups.CONDITION_READY, meta.ConditionStatus.TRUE, T0, "ClusterReady")
DNS_OK = _condition(
    groups.CONDITION_SERVICE_DOMAIN_NAME_RESOLUTION_READY, meta.ConditionStatus.TRUE, T0
)


def test_set_condition_adds_a_new_type_with_its_time() -> None:
    result = meta.set_condition((READY,), DNS_OK)
    assert result == (READY, DNS_OK)


def test_same_status_keeps_last_transition_time_but_updates_the_rest() -> None:
    update = dataclasses.replace(
        DNS_OK, last_transition_time=T1, reason="StillResolving", observed_generation=4
    )
    (result,) = meta.set_condition((DNS_OK,), update)
    assert result.last_transition_time == T0
    assert result.reason == "StillResolving"
    assert result.message == DNS_OK.message
    assert result.observed_generation == 4


def test_status_flip_moves_last_transition_time() -> None:
    failed = _condition(DNS_OK.type, meta.ConditionStatus.FALSE, T1, "ResolutionFailed")
    (after_flip,) = meta.set_condition((DNS_OK,), failed)
    assert after_flip == failed
    still_failed = dataclasses.replace(failed, last_transition_time=T2, message="again")
    (after_repeat,) = meta.set_condition((after_flip,), still_failed)
    assert after_repeat.last_transition_time == T1
    assert after_repeat.message == "again"
    recovered = _condition(DNS_OK.type, meta.ConditionStatus.TRUE, T2)
    (after_recovery,) = meta.set_condition((after_repeat,), recovered)
    assert after_recovery.last_transition_time == T2


def test_set_condition_returns_a_new_sequence_in_order() -> None:
    original = [READY, DNS_OK]
    flipped = _condition(groups.CONDITION_READY, meta.ConditionStatus.FALSE, T1)
    result = meta.set_condition(original, flipped)
    assert original == [READY, DNS_OK]
    assert isinstance(result, tuple)
    assert [c.type for c in result] == [READY.type, DNS_OK.type]
    assert result[0] == flipped


def test_set_condition_collapses_duplicate_types() -> None:
    duplicate = dataclasses.replace(READY, reason="Stale")
    result = meta.set_condition((READY, DNS_OK, duplicate), READY)
    assert [c.type for c in result] == [READY.type, DNS_OK.type]


def test_find_and_remove_condition() -> None:
    conditions = (READY, DNS_OK)
    assert meta.find_condition(conditions, DNS_OK.type) == DNS_OK
    assert meta.find_condition(conditions, "Missing") is None
    assert meta.find_condition((), groups.CONDITION_READY) is None
    assert meta.remove_condition(conditions, READY.type) == (DNS_OK,)
    assert meta.remove_condition(conditions, "Missing") == conditions


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-25T04:05:57Z", T0),
        ("2024-01-25t04:05:57z", T0),
        ("2024-01-25T06:05:57+02:00", T0),
        ("2024-01-24T23:05:57-05:00", T0),
        ("2024-01-25T04:05:57.123456789Z", T0),
    ],
)
def test_parse_time(text: str, expected: datetime.datetime) -> None:
    parsed = meta.parse_time(text)
    assert parsed == expected
    assert parsed.tzinfo is datetime.UTC


@pytest.mark.parametrize(
    "text", ["2024-01-25", "2024-01-25T04:05:57", "2024-01-25 04:05:57Z", "2024-13-01T00:00:00Z"]
)
def test_parse_time_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="2024"):
        meta.parse_time(text)


def test_format_time() -> None:
    assert meta.format_time(T0) == "2024-01-25T04:05:57Z"
    assert meta.format_time(T0.replace(microsecond=500000)) == "2024-01-25T04:05:57Z"
    local = T0.astimezone(datetime.timezone(datetime.timedelta(hours=-3)))
    assert meta.format_time(local) == "2024-01-25T04:05:57Z"
    with pytest.raises(ValueError, match="naive"):
        meta.format_time(datetime.datetime(2024, 1, 25))


def test_now_is_utc_whole_seconds() -> None:
    current = meta.now()
    assert current.tzinfo is datetime.UTC
    assert current.microsecond == 0
    assert meta.parse_time(meta.format_time(current)) == current


# --- bounded messages ---------------------------------------------------------------------

def test_join_limited_keeps_everything_that_fits() -> None:
    assert meta.join_limited(["a", "b", "c"]) == "a, b, c"
    assert meta.join_limited([]) == ""
    exact = ["x" * 4] * 3  # "xxxx, xxxx, xxxx" is 16 characters
    assert meta.join_limited(exact, budget=16) == "xxxx, xxxx, xxxx"


def test_join_limited_says_how_many_were_left_out() -> None:
    names = [f"cluster-{i:012d}" for i in range(3000)]  # 20 characters each
    text = meta.join_limited(names)
    assert len(text) <= meta.MESSAGE_BUDGET
    shown, _, tail = text.partition(" \u2026 and ")
    kept = shown.split(", ")
    assert kept == names[:len(kept)]  # in order, none cut in the middle
    assert tail == f"{3000 - len(kept)} more"
    assert len(kept) > 40  # the budget is used, not wasted


@pytest.mark.parametrize("budget", [10, 25, 26, 40, 100])
def test_join_limited_never_exceeds_a_workable_budget(budget: int) -> None:
    names = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"] * 5
    text = meta.join_limited(names, budget=budget)
    assert len(text) <= max(budget, len(f"\u2026 and {len(names)} more"))
    assert text.endswith(" more")


def test_bound_message() -> None:
    assert meta.bound_message("short") == "short"
    long = "x" * (meta.MAX_CONDITION_MESSAGE + 500)
    cut = meta.bound_message(long)
    assert len(cut) == meta.MAX_CONDITION_MESSAGE
    assert cut.endswith(f"(cut from {len(long)} characters)")
    assert meta.bound_message("abcdef", limit=3) == "abc"


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Shared(meta.Object):
    spec: meta.Condition = meta.spec()


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Pinned(_Shared, resource=groups.WORK):
    """A kind named by its resource."""


def test_a_kind_named_by_its_resource_pins_api_version_and_kind_before_metadata() -> None:
    fields = {f.name: f for f in dataclasses.fields(_Pinned)}
    assert list(fields) == ["api_version", "kind", "metadata", "spec"]
    assert fields["api_version"].default == fields["api_version"].metadata["const"] == (
        "work.karmada.io/v1alpha1")
    assert fields["kind"].default == fields["kind"].metadata["const"] == "Work"
    # what two kinds share pins nothing: its apiVersion and kind stay required
    assert dataclasses.fields(_Shared)[0].default is dataclasses.MISSING
    spec = {"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-25T04:05:57Z",
            "reason": "Probe", "message": ""}
    assert _Pinned.from_dict({"spec": spec}).kind == "Work"
    with pytest.raises(meta.ValidationError, match="kind"):
        _Pinned.from_dict({"kind": "Cluster", "spec": spec})
