"""``clusterhealth remedy test`` as a user's CI runs it: a process, its output, its exit code."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest
import yaml

from clusterhealth_cli import errors

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "examples" / "remedy-tests" / "remedy-test.yaml"
BIN = pathlib.Path(sys.executable).parent
DNS = "ServiceDomainNameResolutionReady"


def clusterhealth(*args: str | pathlib.Path, cwd: pathlib.Path = REPO
                  ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "clusterhealth"), *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=60, check=False)


def test_the_shipped_example_passes() -> None:
    """docs/examples/remedy-tests: the proposal's two Remedies and their cases."""
    done = clusterhealth("remedy", "test", EXAMPLE)
    assert done.returncode == errors.OK, done.stdout + done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[0] == str(EXAMPLE)
    assert sum(1 for line in lines if line.startswith("  PASS  ")) == 6
    assert lines[-1] == "6 passed, 0 failed (1 file)"


def failing_file(directory: pathlib.Path) -> pathlib.Path:
    """The shipped Remedies with one right and one wrong expectation."""
    path = directory / "failing.yaml"
    path.write_text(yaml.safe_dump({
        "remedyFiles": [str(EXAMPLE.parent / "remedies.yaml")],
        "tests": [
            {"name": "right", "clusters": [{"name": "member2", "conditions": {DNS: "False"}}],
             "expect": [{"cluster": "member2", "remedyActions": ["TrafficControl"]}]},
            {"name": "wrong: maintenance forgotten",
             "clusters": [{"name": "member1", "conditions": {DNS: "True"}}]},
        ]}, sort_keys=False))
    return path


def test_a_failing_case_exits_1_with_a_diff(tmp_path: pathlib.Path) -> None:
    done = clusterhealth("remedy", "test", failing_file(tmp_path))
    assert done.returncode == errors.TEST_FAILED
    assert done.stderr == ""
    assert "  PASS  right\n" in done.stdout
    assert ("  FAIL  wrong: maintenance forgotten\n"
            "        cluster member1:\n"
            "          --- expected\n"
            "          +++ got (the remedy controller)\n"
            "          -remedyActions: []\n"
            "          +remedyActions: [TrafficControl]\n"
            "          why:\n") in done.stdout
    assert ("Remedy planned-maintenance: acts immediately (no decisionMatches): "
            "TrafficControl") in done.stdout
    assert (f"Remedy dns-failure: covers it, but no decision match holds: {DNS} Equal False "
            "(it is True)") in done.stdout
    assert done.stdout.endswith("1 passed, 1 failed (1 file)\n")


def test_several_files(tmp_path: pathlib.Path) -> None:
    done = clusterhealth("remedy", "test", EXAMPLE, failing_file(tmp_path))
    assert done.returncode == errors.TEST_FAILED
    assert done.stdout.endswith("7 passed, 1 failed (2 files)\n")


BAD = [
    ("not YAML", "tests: [\n", "not valid YAML: line 2, column 1"),
    ("a Remedy manifest", (EXAMPLE.parent / "remedies.yaml").read_text(),
     "this is a Remedy manifest, not a test file: list it under remedyFiles"),
    ("unknown field in a Remedy",
     "remedies:\n- apiVersion: remedy.karmada.io/v1alpha1\n  kind: Remedy\n"
     "  metadata: {name: r}\n  spec: {actions: [TrafficControl], clusterAfinity: {}}\n"
     "tests: [{name: t, clusters: [{name: m}]}]\n",
     "remedies[0]: invalid Remedy r: spec.clusterAfinity: unknown field"),
    ("unknown field in the test file", "tests: [{name: t, clusters: [{name: m}]}]\nrule: 1\n",
     "bad.yaml: rule: unknown field"),
    ("empty", "", "is empty: not a Remedy test file"),
]


@pytest.mark.parametrize(("text", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_one_message_exit_3(tmp_path: pathlib.Path, text: str, message: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    done = clusterhealth("remedy", "test", bad)
    assert done.returncode == errors.INPUT
    assert done.stdout == ""
    assert done.stderr.startswith(f"clusterhealth: error: {bad}")
    assert message in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr


def test_missing_file_and_usage(tmp_path: pathlib.Path) -> None:
    done = clusterhealth("remedy", "test", tmp_path / "nope.yaml")
    assert (done.returncode, done.stderr) == (
        errors.INPUT, f"clusterhealth: error: {tmp_path / 'nope.yaml'}: test file not found\n")
    done = clusterhealth("remedy", "test")
    assert done.returncode == errors.USAGE
    assert "error: the following arguments are required: FILE" in done.stderr
    done = clusterhealth("remedy", "lint", EXAMPLE)
    assert done.returncode == errors.USAGE
    assert "Traceback" not in done.stderr


def test_a_broken_file_among_good_ones(tmp_path: pathlib.Path) -> None:
    """The other files still run and report; the exit code says the input was broken."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("tests: [\n")
    done = clusterhealth("remedy", "test", EXAMPLE, bad, failing_file(tmp_path))
    assert done.returncode == errors.INPUT
    assert done.stdout.endswith("7 passed, 1 failed (2 files)\n")
    assert done.stderr.count("error:") == 1


def test_python_dash_m(tmp_path: pathlib.Path) -> None:
    done = subprocess.run([sys.executable, "-m", "clusterhealth_cli", "remedy", "test",
                           str(EXAMPLE)], capture_output=True, text=True, timeout=60,
                          check=False, cwd=tmp_path)
    assert done.returncode == errors.OK, done.stderr
