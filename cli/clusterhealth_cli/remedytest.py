"""``clusterhealth remedy test``: run Remedy test cases through the controller's decision code.

Each fixture Cluster goes through exactly what the remedy controller does on a
reconcile: the Remedies are put in its :class:`clusterhealth_remedy.index.RemedyIndex`,
``RemedyIndex.decide`` picks the Remedies that act, and
``decision.status_patch`` gives the ``remedyActions`` and
``remedyActionSources`` the controller would write.  That is compared with the
case's expectation; a difference is shown as a diff of the two status
fragments, followed by why each Remedy did or did not act.

Pure: suites in, results and text out (files are read by :mod:`.testfile`).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from clusterhealth_cli import testfile, verdicts
from clusterhealth_remedy import decision, index


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One fixture Cluster of a case: expected and computed status, and why."""

    cluster: str
    expected: Mapping[str, Any]
    """The compared status fields, wire shape (``remedyActionSources`` only when checked)."""
    got: Mapping[str, Any]
    """The same fields as the controller would write them."""
    verdicts: tuple[verdicts.Verdict, ...]

    @property
    def passed(self) -> bool:
        """Whether the controller would write what the case expects."""
        return self.expected == self.got


@dataclasses.dataclass(frozen=True)
class CaseResult:
    """One test case's outcome for each of its clusters."""

    name: str
    outcomes: tuple[Outcome, ...]

    @property
    def passed(self) -> bool:
        """Whether every cluster got what was expected."""
        return all(outcome.passed for outcome in self.outcomes)


@dataclasses.dataclass(frozen=True)
class SuiteResult:
    """A test file's cases, and the Remedies the controller would report as never acting."""

    path: str
    cases: tuple[CaseResult, ...]
    warnings: tuple[str, ...]

    @property
    def failed(self) -> int:
        """How many cases failed."""
        return sum(1 for case in self.cases if not case.passed)


def _wire_sources(sources: Mapping[str, Sequence[str]]) -> list[dict[str, Any]]:
    return [{"action": action, "remedies": list(sources[action])} for action in sorted(sources)]


def expected_fields(expectation: testfile.Expectation) -> dict[str, Any]:
    """The expectation in the controller's wire shape (``remedyActions`` always)."""
    fields: dict[str, Any] = {"remedyActions": list(expectation.remedy_actions)}
    if expectation.remedy_action_sources is not None:
        fields["remedyActionSources"] = _wire_sources(expectation.remedy_action_sources)
    return fields


def computed_fields(patch: Mapping[str, Any], with_sources: bool) -> dict[str, Any]:
    """``decision.status_patch``'s fields, absent ones as empty lists (an expectation's shape)."""
    fields: dict[str, Any] = {"remedyActions": list(patch.get("remedyActions") or [])}
    if with_sources:
        fields["remedyActionSources"] = [
            {"action": s["action"], "remedies": list(s["remedies"])}
            for s in patch.get("remedyActionSources") or []]
    return fields


def build_index(suite: testfile.Suite) -> index.RemedyIndex:
    """The controller's Remedy index holding the suite's Remedies."""
    remedies = index.RemedyIndex()
    for r in suite.remedies:
        remedies.put(r)
    return remedies


def run_case(case: testfile.Case, remedies: index.RemedyIndex) -> CaseResult:
    """Decide every fixture Cluster of ``case`` as the controller would."""
    expectations = {e.cluster: e for e in case.expect}
    outcomes: list[Outcome] = []
    for fixture in case.clusters:
        expectation = expectations[fixture.name]
        result = remedies.decide(fixture.name, fixture.conditions)
        got = computed_fields(decision.status_patch(result),
                              expectation.remedy_action_sources is not None)
        why = tuple(verdicts.verdict(r, fixture.name, fixture.conditions)
                    for r in sorted(remedies.remedies.values(), key=lambda r: r.metadata.name))
        outcomes.append(Outcome(fixture.name, expected_fields(expectation), got, why))
    return CaseResult(case.name, tuple(outcomes))


def warnings(suite: testfile.Suite) -> tuple[str, ...]:
    """Remedies that can never act: what the controller reports in their ``Effective`` condition."""
    found: list[str] = []
    for r in sorted(suite.remedies, key=lambda r: r.metadata.name):
        effective, reason, message = decision.effectiveness(r)
        if not effective:
            found.append(f"Remedy {r.metadata.name} ({suite.origins[r.metadata.name]}) never "
                         f"acts ({reason}): {message}")
    return tuple(found)


def run(suite: testfile.Suite) -> SuiteResult:
    """Every case of a test file."""
    remedies = build_index(suite)
    return SuiteResult(str(suite.path), tuple(run_case(case, remedies) for case in suite.cases),
                       warnings(suite))


# --- text -------------------------------------------------------------------------------

def _flow(items: Iterable[str]) -> str:
    return "[" + ", ".join(items) + "]"


def render_fields(fields: Mapping[str, Any]) -> list[str]:
    """Status fields as compact YAML lines (one per action source), for the diff."""
    lines = [f"remedyActions: {_flow(fields['remedyActions'])}"]
    if "remedyActionSources" in fields:
        sources = fields["remedyActionSources"]
        if not sources:
            lines.append("remedyActionSources: []")
        else:
            lines.append("remedyActionSources:")
            lines += [f"  - {{action: {s['action']}, remedies: {_flow(s['remedies'])}}}"
                      for s in sources]
    return lines


def diff(outcome: Outcome) -> list[str]:
    """A unified diff, expected to got, of the compared fields."""
    lines = difflib.unified_diff(render_fields(outcome.expected), render_fields(outcome.got),
                                 fromfile="expected", tofile="got (the remedy controller)",
                                 lineterm="", n=100)
    return [line for line in lines if not line.startswith("@@")]


def render_case(case: CaseResult) -> list[str]:
    """``PASS name`` or ``FAIL name`` with, per differing cluster, the diff and the reasons."""
    if case.passed:
        return [f"  PASS  {case.name}"]
    lines = [f"  FAIL  {case.name}"]
    for outcome in case.outcomes:
        if outcome.passed:
            continue
        lines.append(f"        cluster {outcome.cluster}:")
        lines += [f"          {line}" for line in diff(outcome)]
        lines.append("          why:")
        if not outcome.verdicts:
            lines.append("            (the test file has no Remedy)")
        lines += [f"            Remedy {v.remedy}: {v.why}" for v in outcome.verdicts]
    return lines


def render(results: Sequence[SuiteResult]) -> str:
    """The report of one run: per file its cases and warnings, then the totals."""
    lines: list[str] = []
    for result in results:
        lines.append(result.path)
        for case in result.cases:
            lines += render_case(case)
        lines += [f"  warning: {w}" for w in result.warnings]
    passed = sum(len(r.cases) - r.failed for r in results)
    failed = sum(r.failed for r in results)
    files = f"{len(results)} file{'s' if len(results) != 1 else ''}"
    lines.append(f"{passed} passed, {failed} failed ({files})")
    return "\n".join(lines) + "\n"
