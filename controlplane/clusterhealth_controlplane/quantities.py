"""Kubernetes resource quantities (``"1.5Gi"``, ``"250m"``, ``3``), read and written exactly.

The cluster-status controller sums Nodes' and Pods' quantities into
``Cluster.status.resourceSummary``, the scheduler reads them back for
available replicas, and the detector sums containers' requests into a
binding's ``replicaRequirements``: one parser (and its inverse) for all of
them, so they agree to the unit.  Never a float: ``"0.1" + "0.2"`` is
``"0.3"``, and ``"1Ei" + "1"`` keeps its last byte.

Read as ``resource.ParseQuantity`` (kubernetes/apimachinery
``pkg/api/resource``) reads: a signed decimal number (``1``, ``1.5``,
``1.``, ``.5``) and one suffix, binary (``Ki`` ... ``Ei``), decimal
(``n u m k M G T P E``) or a decimal exponent (``e3``, ``E-2``); a value
finer than a nano-unit is rounded away from zero to one (``"0.9n"`` is
``1n``), and a binary-suffixed value is capped at ``2**63 - 1``.
Pure: no imports of the project.
"""

from __future__ import annotations

import fractions
import math
import re

_QUANTITY = re.compile(
    r"([+-]?)([0-9]+\.?[0-9]*|\.[0-9]+)(?:([eE][+-]?[0-9]+)|([KMGTPE]i)|([numkMGTPE]?))")
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
NANO = fractions.Fraction(1, 10**9)
BINARY_MAX = 2**63 - 1
"""Kubernetes caps a binary-suffixed quantity here (``"8Ei"`` reads as this)."""
BINARY_SI = ("memory", "ephemeral-storage")
"""Resources Kubernetes writes with binary suffixes (``hugepages-*`` too)."""


def parse(value: str | int) -> fractions.Fraction:
    """A quantity as an exact number; ``ValueError`` naming the value when it is not one."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"not a quantity: {value!r} (a string such as '250m' or an integer)")
    if isinstance(value, int):
        return fractions.Fraction(value)
    found = _QUANTITY.fullmatch(value)
    if found is None:
        raise ValueError(
            f"not a quantity: {value!r} (a number with at most one suffix: Ki, Mi, Gi, Ti, Pi, "
            "Ei, n, u, m, k, M, G, T, P, E, or an exponent such as e3)")
    sign, number, exponent, binary, si = found.groups()
    amount = fractions.Fraction(number)
    if exponent is not None:
        amount *= fractions.Fraction(10) ** int(exponent[1:])
    elif binary is not None:
        amount = min(amount * 1024 ** _BINARY[binary], fractions.Fraction(BINARY_MAX))
    else:
        amount *= fractions.Fraction(10) ** _DECIMAL[si]
    amount = math.ceil(amount / NANO) * NANO  # finer than nano: rounded up, as Kubernetes does
    return -amount if sign == "-" else amount


def plain(amount: fractions.Fraction) -> str:
    """``amount`` as a plain decimal number (``"3"``, ``"0.75"``, ``"-2"``), to the nano-unit."""
    nanos = math.ceil(abs(amount) / NANO)
    whole, fraction = divmod(nanos, 10**9)
    text = f"{whole}.{fraction:09d}".rstrip("0").rstrip(".")
    return f"-{text}" if amount < 0 and nanos else text


def format_for(resource: str, amount: fractions.Fraction) -> str:
    """``amount`` of ``resource`` written as Kubernetes would, rounded up.

    CPU in whole cores or milli-units (``"2"``, ``"1500m"``); memory,
    ephemeral storage and huge pages with the largest binary suffix that
    divides them (``"64Gi"``); anything else as a plain integer.
    """
    if resource == "cpu":
        milli = math.ceil(amount * 1000)
        return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
    value = math.ceil(amount)
    if value and (resource in BINARY_SI or resource.startswith("hugepages-")):
        for suffix, power in reversed(_BINARY.items()):
            if value % 1024**power == 0:
                return f"{value // 1024**power}{suffix}"
    return str(value)
