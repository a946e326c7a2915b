"""Kubernetes resource quantities (``"1.5Gi"``, ``"250m"``, ``3``), read and written exactly.

The cluster-status controller sums Nodes' and Pods' quantities into
``Cluster.status.resourceSummary`` and the scheduler reads them back for
available replicas: one parser (and its inverse) so both agree to the unit.
Pure: no imports of the project.
"""

from __future__ import annotations

import fractions
import math
import re

_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))([eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?$")
_SUFFIX = {
    "": fractions.Fraction(1), "n": fractions.Fraction(1, 10**9),
    "u": fractions.Fraction(1, 10**6), "m": fractions.Fraction(1, 1000),
    "k": fractions.Fraction(10**3), "M": fractions.Fraction(10**6),
    "G": fractions.Fraction(10**9), "T": fractions.Fraction(10**12),
    "P": fractions.Fraction(10**15), "E": fractions.Fraction(10**18),
    "Ki": fractions.Fraction(2**10), "Mi": fractions.Fraction(2**20),
    "Gi": fractions.Fraction(2**30), "Ti": fractions.Fraction(2**40),
    "Pi": fractions.Fraction(2**50), "Ei": fractions.Fraction(2**60),
}
_BINARY = (("Ei", 6), ("Pi", 5), ("Ti", 4), ("Gi", 3), ("Mi", 2), ("Ki", 1))
BINARY_SI = ("memory", "ephemeral-storage")
"""Resources Kubernetes writes with binary suffixes (``hugepages-*`` too)."""


def parse(value: str | int) -> fractions.Fraction:
    """A quantity as an exact number; ``ValueError`` when it is not one."""
    if isinstance(value, int):
        return fractions.Fraction(value)
    found = _QUANTITY.match(str(value).strip())
    if found is None:
        raise ValueError(f"not a quantity: {value!r}")
    number, suffix = found.group(1), found.group(2) or ""
    if suffix[:1] in ("e", "E"):
        return fractions.Fraction(number) * fractions.Fraction(10) ** int(suffix[1:])
    return fractions.Fraction(number) * _SUFFIX[suffix]


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
        for suffix, power in _BINARY:
            if value % 1024**power == 0:
                return f"{value // 1024**power}{suffix}"
    return str(value)
