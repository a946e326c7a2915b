"""Remedy test files as tables: what is accepted, what is refused and how, what a case gives."""

from __future__ import annotations

import copy
import io
import pathlib
from typing import Any

import clikit
import pytest
import yaml

from clusterhealth_cli import app, errors, remedytest, testfile
from clusterhealth_remedy import decision

DNS = clikit.DNS
TC = clikit.TC


remedy_obj = clikit.remedy


BASE: dict[str, Any] = {
    "remedies": [remedy_obj("dns", ["m1", "m2"]),
                 remedy_obj("maint", ["m1"], match=None)],
    "tests": [{
        "name": "dns down on m2",
        "clusters": [{"name": "m1", "conditions": {DNS: "True"}},
                     {"name": "m2", "conditions": {DNS: "False"}},
                     {"name": "m3", "conditions": {DNS: "False"}}],
        "expect": [{"cluster": "m1", "remedyActions": [TC]},
                   {"cluster": "m2", "remedyActions": [TC],
                    "remedyActionSources": [{"action": TC, "remedies": ["dns"]}]}],
    }],
}


def parse(doc: Any, path: pathlib.Path = pathlib.Path("t.yaml")) -> testfile.Suite:
    return testfile.parse(doc, path)


def edited(change: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    change(doc)
    return doc


def test_base_file_parses() -> None:
    suite = parse(BASE)
    assert [r.metadata.name for r in suite.remedies] == ["dns", "maint"]
    (case,) = suite.cases
    assert [c.name for c in case.clusters] == ["m1", "m2", "m3"]
    # m3 is not listed under expect: it is expected to get nothing
    assert {e.cluster: e.remedy_actions for e in case.expect} == {
        "m1": (TC,), "m2": (TC,), "m3": ()}
    assert {e.cluster: e.remedy_action_sources for e in case.expect} == {
        "m1": None, "m2": {TC: ("dns",)}, "m3": None}


def _set(path: list[Any], value: Any) -> Any:
    def change(doc: dict[str, Any]) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


def _delete(path: list[Any]) -> Any:
    def change(doc: dict[str, Any]) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    return change


REFUSED = [
    ("unknown top-level field", _set(["rules"], []), "t.yaml: rules: unknown field"),
    ("unknown Remedy field",
     _set(["remedies", 0, "spec", "decisionMatches", 0, "clusterConditionMatch", "severity"],
          "high"),
     "remedies[0]: invalid Remedy dns: "
     "spec.decisionMatches[0].clusterConditionMatch.severity: unknown field"),
    ("unknown spec field", _set(["remedies", 0, "spec", "clusterSelector"], {}),
     "invalid Remedy dns: spec.clusterSelector: unknown field"),
    ("unknown action", _set(["remedies", 0, "spec", "actions"], ["Drain"]),
     "invalid Remedy dns: spec.actions[0]: must be one of TrafficControl; got 'Drain'"),
    ("boolean conditionStatus",
     _set(["remedies", 0, "spec", "decisionMatches", 0, "clusterConditionMatch",
           "conditionStatus"], False),
     "clusterConditionMatch.conditionStatus: must be one of True, False, Unknown; got False "
     "(a boolean: quote it, \"False\")"),
    ("bad operator",
     _set(["remedies", 0, "spec", "decisionMatches", 0, "clusterConditionMatch", "operator"],
          "In"),
     "operator: must be one of Equal, NotEqual; got 'In'"),
    ("empty decision match", _set(["remedies", 0, "spec", "decisionMatches"], [{}]),
     "spec.decisionMatches[0]: must set clusterConditionMatch"),
    ("duplicate cluster name in affinity",
     _set(["remedies", 0, "spec", "clusterAffinity", "clusterNames"], ["m1", "m1"]),
     "invalid Remedy dns: spec.clusterAffinity.clusterNames"),
    ("wrong group (the proposal's typo)",
     _set(["remedies", 1, "apiVersion"], "rededition.karmada.io/v1alpha1"),
     "remedies[1]: not a Remedy: apiVersion 'rededition.karmada.io/v1alpha1', kind 'Remedy'"),
    ("not a Remedy", _set(["remedies", 1], {"apiVersion": "v1", "kind": "ConfigMap"}),
     "remedies[1]: not a Remedy: apiVersion 'v1', kind 'ConfigMap'"),
    ("Remedy without a name", _delete(["remedies", 1, "metadata", "name"]),
     "remedies[1]: invalid Remedy: metadata.name: required"),
    ("Remedy with an invalid name", _set(["remedies", 1, "metadata", "name"], "Maint_1"),
     "metadata.name: 'Maint_1' is not a valid name"),
    ("two Remedies of one name", _set(["remedies", 1, "metadata", "name"], "dns"),
     "remedies[1]: Remedy dns is defined twice (also in t.yaml: remedies[0])"),
    ("no tests", _set(["tests"], []), "t.yaml: tests: no test in the file"),
    ("tests not a list", _set(["tests"], {"name": "x"}), "t.yaml: tests: must be a list"),
    ("unknown case field", _set(["tests", 0, "input"], []),
     "t.yaml: tests[0].input: unknown field (allowed here: name, clusters, expect)"),
    ("case without a name", _delete(["tests", 0, "name"]),
     "tests[0].name: must be a non-empty string"),
    ("case without clusters", _set(["tests", 0, "clusters"], []),
     "tests[0] (dns down on m2).clusters: needs at least one cluster"),
    ("a cluster twice", _set(["tests", 0, "clusters", 1, "name"], "m1"),
     "clusters[1].name: cluster m1 given twice"),
    ("boolean condition status", _set(["tests", 0, "clusters", 0, "conditions"], {DNS: True}),
     f"clusters[0].conditions.{DNS}: must be one of True, False, Unknown, got the boolean "
     "True: quote it"),
    ("bad condition status", _set(["tests", 0, "clusters", 0, "conditions"], {DNS: "Down"}),
     "must be one of True, False, Unknown, got a string ('Down')"),
    ("bad condition type", _set(["tests", 0, "clusters", 0, "conditions"], {"not ok": "True"}),
     "'not ok' is not a condition type"),
    ("condition twice in list form",
     _set(["tests", 0, "clusters", 0, "conditions"],
          [{"type": DNS, "status": "True"}, {"type": DNS, "status": "False"}]),
     f"conditions[1].status: condition {DNS} given twice"),
    ("unknown cluster field", _set(["tests", 0, "clusters", 0, "taints"], []),
     "clusters[0].taints: unknown field (allowed here: name, labels, conditions)"),
    ("expectation for a cluster not in the test", _set(["tests", 0, "expect", 0, "cluster"],
                                                         "m9"),
     "expect[0].cluster: 'm9' is not a cluster of this test (its clusters: m1, m2, m3)"),
    ("expectation without remedyActions", _delete(["tests", 0, "expect", 0, "remedyActions"]),
     "expect[0].remedyActions: required (use [] to expect no action)"),
    ("misspelt expected action", _set(["tests", 0, "expect", 0, "remedyActions"],
                                      ["TrafficControll"]),
     "expect[0].remedyActions[0]: 'TrafficControll' is not a remedy action (did you mean "
     "'TrafficControl'?)"),
    ("a cluster expected twice", _set(["tests", 0, "expect", 1, "cluster"], "m1"),
     "expect[1].cluster: cluster m1 expected twice"),
    # misspellings name what was meant
    ("misspelt Remedy key", _set(["remedies", 0, "spec", "decisionMatch"], []),
     "invalid Remedy dns: spec.decisionMatch: unknown field (did you mean 'decisionMatches'?)"),
    ("misspelt case key", _set(["tests", 0, "expected"], []),
     "t.yaml: tests[0].expected: unknown field (did you mean 'expect'?)"),
    ("misspelt expectation key", _set(["tests", 0, "expect", 0, "remedyAction"], []),
     "unknown field (did you mean 'remedyActions'?)"),
    ("lower-case conditionStatus in a Remedy",
     _set(["remedies", 0, "spec", "decisionMatches", 0, "clusterConditionMatch",
           "conditionStatus"], "false"),
     "clusterConditionMatch.conditionStatus: must be one of True, False, Unknown; got 'false' "
     "(did you mean 'False'?)"),
    ("unknown conditionStatus in a Remedy",
     _set(["remedies", 0, "spec", "decisionMatches", 0, "clusterConditionMatch",
           "conditionStatus"], "Down"),
     "conditionStatus: must be one of True, False, Unknown; got 'Down'"),
    ("lower-case fixture status", _set(["tests", 0, "clusters", 0, "conditions"],
                                       {DNS: "false"}),
     "got a string ('false') (did you mean 'False'?)"),
    ("expected source names no Remedy of the file",
     _set(["tests", 0, "expect", 1, "remedyActionSources"], [{"action": TC,
                                                               "remedies": ["dsn"]}]),
     "expects Remedy dsn on m2, but the file defines no Remedy of that name "
     "(it defines: dns, maint)"),
]


@pytest.mark.parametrize(("change", "message"), [r[1:] for r in REFUSED],
                         ids=[r[0] for r in REFUSED])
def test_refused(change: Any, message: str) -> None:
    with pytest.raises(errors.CliError) as caught:
        parse(edited(change))
    assert caught.value.code == errors.INPUT
    assert message in caught.value.message


NOT_TEST_FILES = [
    ("a Remedy", remedy_obj("dns"), "this is a Remedy manifest, not a test file: list it "
                                    "under remedyFiles"),
    ("a List of Remedies", {"apiVersion": "v1", "kind": "List", "items": []},
     "this is a List manifest, not a test file"),
    ("another kind", {"apiVersion": "v1", "kind": "ConfigMap"},
     "this is a ConfigMap manifest, not a Remedy test file"),
    ("a list", [1, 2], "not a Remedy test file: expected a mapping with remedyFiles or "
                       "remedies, and tests"),
    ("no tests key", {"remedies": []}, "not a Remedy test file"),
]


@pytest.mark.parametrize(("doc", "message"), [r[1:] for r in NOT_TEST_FILES],
                         ids=[r[0] for r in NOT_TEST_FILES])
def test_not_a_test_file(doc: Any, message: str) -> None:
    with pytest.raises(errors.CliError) as caught:
        parse(doc)
    assert message in caught.value.message


def test_files_yaml_and_remedy_files(tmp_path: pathlib.Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "r.yaml").write_text(yaml.safe_dump_all(
        [remedy_obj("dns", ["m1"]), {"apiVersion": "v1", "kind": "List",
                                     "items": [remedy_obj("maint", ["m1"], match=None)]}]))
    test = tmp_path / "t.yaml"
    test.write_text(yaml.safe_dump({"remedyFiles": ["sub/r.yaml"], "tests": [
        {"name": "x", "clusters": [{"name": "m1"}]}]}))
    suite = testfile.load(test)
    assert suite.origins == {"dns": f"{tmp_path}/sub/r.yaml, document 1",
                             "maint": f"{tmp_path}/sub/r.yaml, document 2, item 1"}

    def refused(text: str, *, name: str = "t.yaml") -> str:
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(errors.CliError) as caught:
            testfile.load(path)
        assert caught.value.code == errors.INPUT
        return caught.value.message

    assert "not valid YAML: line 2, column 1: expected ',' or ']'" in refused("tests: [x\n")
    assert "is empty: not a Remedy test file" in refused("# nothing\n")
    assert "a test file is one YAML document; this one has 2" in refused("a: 1\n---\nb: 2\n")
    assert "this is a Remedy manifest" in refused(yaml.safe_dump_all(
        [remedy_obj("a"), remedy_obj("b")]))
    assert refused("remedyFiles: [missing.yaml]\ntests: [{name: x, clusters: [{name: m}]}]\n"
                   ).endswith("missing.yaml: Remedy manifest not found")
    (tmp_path / "empty.yaml").write_text("---\n")
    assert "empty.yaml: holds no Remedy" in refused(
        "remedyFiles: [empty.yaml]\ntests: [{name: x, clusters: [{name: m}]}]\n")
    (tmp_path / "bad.yaml").write_text("kind: Remedy\napiVersion: remedy.karmada.io/v1alpha1\n"
                                       "metadata: {name: r}\nspec: {actions: [TrafficControl], "
                                       "decisionMatch: []}\n")
    assert refused("remedyFiles: [bad.yaml]\ntests: [{name: x, clusters: [{name: m}]}]\n"
                   ).endswith("bad.yaml: invalid Remedy r: spec.decisionMatch: unknown field "
                                 "(did you mean 'decisionMatches'?)")
    (tmp_path / "adir").mkdir()
    with pytest.raises(errors.CliError) as caught:
        testfile.load(tmp_path / "adir")
    assert caught.value.message.endswith("adir: is a directory, not a test file")
    with pytest.raises(errors.CliError) as caught:
        testfile.load(tmp_path / "nope.yaml")
    assert caught.value.message.endswith("nope.yaml: test file not found")


# --- running cases: the controller's decision ---------------------------------------------

def run(remedies: list[dict[str, Any]], conditions: dict[str, str] | list[dict[str, str]],
        expect: dict[str, Any] | None, cluster: str = "m1") -> remedytest.CaseResult:
    case: dict[str, Any] = {"name": "c", "clusters": [{"name": cluster,
                                                       "conditions": conditions}]}
    if expect is not None:
        case["expect"] = [{"cluster": cluster, **expect}]
    suite = parse({"remedies": remedies, "tests": [case]})
    (result,) = remedytest.run(suite).cases
    return result


NE = remedy_obj("ne", match=(DNS, "NotEqual", "True"))
EQ = remedy_obj("eq", ["m1"])
NOW = remedy_obj("now", match=None)
NOWHERE = {**remedy_obj("nowhere", match=None),
           "spec": {"clusterAffinity": {}, "actions": [TC]}}
NEVER = {**remedy_obj("never"), "spec": {"decisionMatches": [], "actions": [TC]}}
NO_ACTIONS = remedy_obj("idle", match=None, actions=[])

CASES = [
    # (id, remedies, conditions, expectation, passes)
    ("Equal holds", [EQ], {DNS: "False"}, {"remedyActions": [TC]}, True),
    ("Equal does not hold on Unknown", [EQ], {DNS: "Unknown"}, {"remedyActions": []}, True),
    ("NotEqual holds on Unknown", [NE], {DNS: "Unknown"}, {"remedyActions": [TC]}, True),
    ("a missing condition matches neither", [NE, EQ], {"Ready": "True"},
     {"remedyActions": []}, True),
    ("no conditions: only immediate Remedies", [NE, EQ, NOW], {},
     {"remedyActions": [TC], "remedyActionSources": [{"action": TC, "remedies": ["now"]}]},
     True),
    ("not expected = expected none", [EQ], {DNS: "False"}, None, False),
    ("not expected, nothing acts", [EQ], {DNS: "True"}, None, True),
    ("affinity without names selects none", [NOWHERE], {}, {"remedyActions": []}, True),
    ("empty decisionMatches never", [NEVER], {DNS: "False"}, {"remedyActions": []}, True),
    ("no actions: not acting", [NO_ACTIONS], {}, {"remedyActions": []}, True),
    ("provenance: both Remedies, sorted", [NOW, EQ], {DNS: "False"},
     {"remedyActions": [TC], "remedyActionSources": [{"action": TC,
                                                      "remedies": ["now", "eq"]}]}, True),
    ("provenance differs", [NOW, EQ], {DNS: "False"},
     {"remedyActions": [TC], "remedyActionSources": [{"action": TC, "remedies": ["eq"]}]},
     False),
    ("provenance not checked when not given", [NOW, EQ], {DNS: "False"},
     {"remedyActions": [TC]}, True),
    ("expected sources of no action", [EQ], {DNS: "True"},
     {"remedyActions": [], "remedyActionSources": []}, True),
    ("the Cluster's condition list", [EQ], [{"type": DNS, "status": "False", "reason": "X"}],
     {"remedyActions": [TC]}, True),
    ("duplicates in the expectation are one action", [EQ], {DNS: "False"},
     {"remedyActions": [TC, TC]}, True),
]


@pytest.mark.parametrize(("remedies", "conditions", "expect", "passes"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_case_outcome(remedies: list[dict[str, Any]], conditions: Any,
                      expect: dict[str, Any] | None, passes: bool) -> None:
    assert run(remedies, conditions, expect).passed is passes


def test_other_cluster_not_covered() -> None:
    assert run([EQ], {DNS: "False"}, {"remedyActions": []}, cluster="m2").passed


def test_failure_diff_and_reasons() -> None:
    result = run([EQ, NE, NOWHERE], {"Ready": "True"}, {"remedyActions": [TC]})
    (outcome,) = result.outcomes
    assert outcome.expected == {"remedyActions": [TC]}
    assert outcome.got == {"remedyActions": []}
    assert remedytest.diff(outcome) == [
        "--- expected", "+++ got (the remedy controller)",
        "-remedyActions: [TrafficControl]", "+remedyActions: []"]
    text = "\n".join(remedytest.render_case(result))
    assert text.startswith("  FAIL  c\n        cluster m1:\n")
    assert (f"Remedy eq: covers it, but no decision match holds: {DNS} Equal False "
            f"(the cluster has no {DNS} condition)") in text
    assert (f"Remedy ne: covers it, but no decision match holds: {DNS} NotEqual True "
            f"(the cluster has no {DNS} condition)") in text
    assert ("Remedy nowhere: does not cover m1: its clusterAffinity names no cluster, "
            "so it acts nowhere") in text


def test_provenance_diff() -> None:
    result = run([NOW, EQ], {DNS: "False"},
                 {"remedyActions": [TC], "remedyActionSources": [{"action": TC,
                                                                  "remedies": ["eq"]}]})
    (outcome,) = result.outcomes
    assert remedytest.diff(outcome)[2:] == [
        " remedyActions: [TrafficControl]",
        " remedyActionSources:",
        "-  - {action: TrafficControl, remedies: [eq]}",
        "+  - {action: TrafficControl, remedies: [eq, now]}"]
    text = "\n".join(remedytest.render_case(result))
    assert f"Remedy eq: acts because {DNS} Equal False holds: TrafficControl" in text
    assert "Remedy now: acts immediately (no decisionMatches): TrafficControl" in text


def test_report_and_warnings() -> None:
    suite = parse({"remedies": [EQ, NEVER], "tests": [
        {"name": "ok", "clusters": [{"name": "m1", "conditions": {DNS: "False"}}],
         "expect": [{"cluster": "m1", "remedyActions": [TC]}]},
        {"name": "bad", "clusters": [{"name": "m1", "conditions": {DNS: "True"}}],
         "expect": [{"cluster": "m1", "remedyActions": [TC]}]}]})
    result = remedytest.run(suite)
    assert result.failed == 1
    text = remedytest.render([result])
    assert text.startswith("t.yaml\n  PASS  ok\n  FAIL  bad\n")
    assert ("  warning: Remedy never (t.yaml: remedies[1]) never acts (NeverMatches): "
            "decisionMatches is an empty list") in text
    assert text.endswith("1 passed, 1 failed (1 file)\n")


def test_uses_the_controllers_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner's answer is the controller's ``decision.decide``: change it, change the result."""
    real = decision.decide

    def nothing(name: str, conditions: Any, remedies: Any) -> decision.Decision:
        return decision.Decision(real(name, conditions, remedies).cluster, ())

    monkeypatch.setattr(decision, "decide", nothing)
    assert not run([NOW], {}, {"remedyActions": [TC]}).passed


def test_a_folder_runs_every_test_file_and_skips_the_manifests(tmp_path: pathlib.Path) -> None:
    (tmp_path / "remedies.yaml").write_text(yaml.safe_dump(remedy_obj("dns", ["m1", "m2"])))
    suite = {"remedyFiles": ["remedies.yaml"], "tests": BASE["tests"]}
    suite = copy.deepcopy(suite)
    suite["tests"][0]["expect"] = [{"cluster": "m2", "remedyActions": [TC]}]
    (tmp_path / "a-test.yaml").write_text(yaml.safe_dump(suite))
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "b-test.yml").write_text(yaml.safe_dump(
        {**suite, "remedyFiles": ["../remedies.yaml"]}))
    out, err = io.StringIO(), io.StringIO()
    assert app.main(["remedy", "test", str(tmp_path)], out=out, err=err) == errors.OK, err
    assert "2 passed, 0 failed (2 files)" in out.getvalue()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert app.main(["remedy", "test", str(empty)], out=out, err=err) == errors.INPUT
    assert "no Remedy test file in this folder" in err.getvalue()
