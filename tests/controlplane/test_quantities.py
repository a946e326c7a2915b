"""The one quantity parser: exact, and read as Kubernetes' ``resource.ParseQuantity`` reads."""

from __future__ import annotations

import fractions

import pytest

from clusterhealth_controlplane import quantities
from clusterhealth_controlplane.detector import decision as detector

F = fractions.Fraction


@pytest.mark.parametrize(("text", "value"), [
    ("0", F(0)), ("3", F(3)), (3, F(3)), ("+3", F(3)), ("-3", F(-3)), ("-250m", F(-1, 4)),
    ("0.1", F(1, 10)), ("1.5", F(3, 2)), ("1.", F(1)), (".5", F(1, 2)), ("007", F(7)),
    ("250m", F(1, 4)), ("100u", F(1, 10**4)), ("5n", F(5, 10**9)), ("2k", F(2000)),
    ("1M", F(10**6)), ("1G", F(10**9)), ("1T", F(10**12)), ("1P", F(10**15)),
    ("1E", F(10**18)), ("1000E", F(10**21)),
    ("1Ki", F(1024)), ("1.5Gi", F(3 * 2**29)), ("1Ti", F(2**40)), ("1Pi", F(2**50)),
    ("7Ei", F(7 * 2**60)), ("8Ei", F(2**63 - 1)), ("100Ei", F(2**63 - 1)),
    ("1e3", F(1000)), ("1E3", F(1000)), ("1e-3", F(1, 1000)), ("1.5e+2", F(150)),
    ("18446744073709551616", F(2**64)), ("0.9n", F(1, 10**9)), ("1.2345", F(12345, 10**4)),
    ("-0.9n", F(-1, 10**9)), ("0.0000000001", F(1, 10**9)),
])
def test_parse(text: str | int, value: fractions.Fraction) -> None:
    assert quantities.parse(text) == value


@pytest.mark.parametrize("text", [
    "", " 1", "1 ", "1K", "1ki", "1KiB", "1e", "1e1.5", "1mm", "1Gi3", "abc", "--1", "+",
    ".", "1..2", "0x10", "\u0661", "1,5", "nan", "inf",
])
def test_invalid_is_a_clear_error(text: str) -> None:
    with pytest.raises(ValueError, match="not a quantity") as raised:
        quantities.parse(text)
    assert repr(text) in str(raised.value)


@pytest.mark.parametrize("value", [1.5, True, None])
def test_only_strings_and_integers(value: object) -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        quantities.parse(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(("amount", "text"), [
    (F(3), "3"), (F(3, 4), "0.75"), (F(-2), "-2"), (F(0), "0"), (F(-1, 4), "-0.25"),
    (F(3, 10), "0.3"), (F(2**60 + 1), str(2**60 + 1)), (F(1, 3 * 10**9), "0.000000001"),
])
def test_plain(amount: fractions.Fraction, text: str) -> None:
    assert quantities.plain(amount) == text


@pytest.mark.parametrize(("requests", "summed"), [
    (["0.1", "0.2"], "0.3"),  # floats said 0.30000000000000004
    (["1Ei", "1"], str(2**60 + 1)),  # floats lost the last byte
    (["100m", "200m"], "300m"), (["1", "500m"], "1500m"), (["64Mi", "1Gi"], str(1088 * 2**20)),
    (["1e3", "1k"], "2000"), (["5n", "5n"], "0.00000001"), (["-1", "3"], "2"),
])
def test_the_detector_sums_exactly(requests: list[str], summed: str) -> None:
    template = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "d", "namespace": "default"},
                "spec": {"replicas": 1, "template": {"spec": {"containers": [
                    {"name": f"c{i}", "resources": {"requests": {"cpu": text}}}
                    for i, text in enumerate(requests)]}}}}
    _, requirements = detector.replica_requirements(template)
    assert requirements is not None
    assert requirements["resourceRequest"] == {"cpu": summed}
