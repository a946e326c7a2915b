"""Bad flags, a bad probe file or a DNS-name API server stop the agent with one clear message."""

from __future__ import annotations

import pathlib
import re
import subprocess

import pytest
import yaml

from clusterhealth_localenv import environment


def _run(python: str, python_env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([python, "-m", "clusterhealth_agent", *args], capture_output=True,
                          text=True, env=python_env, timeout=60, check=False)


@pytest.fixture
def base_args(env: environment.LocalEnvironment) -> list[str]:
    return ["--kubeconfig", str(env.kubeconfig("member1")),
            "--karmada-kubeconfig", str(env.kubeconfig()),
            "--cluster-name", "member1", "--host-name", "node-x", "--healthz-port", "0"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--detect-period", "often"], "not a duration"),
        (["--failure-quorum", "0"], r"must be in \(0, 1\]"),
        (["--probe-timeout", "6s"], "must be shorter than --detect-period"),
        (["--detectors", "dns,telepathy"], "telepathy"),
        (["--stale-threshold", "10s"], "must be longer than --node-heartbeat-period"),
        (["--cluster-name", "Not_A_Name"], "--cluster-name"),
    ],
)
def test_bad_flags(python: str, python_env: dict[str, str], base_args: list[str],
                   extra: list[str], message: str) -> None:
    result = _run(python, python_env, *base_args, *extra)
    assert result.returncode != 0
    assert "clusterhealth-agent: error:" in result.stderr
    assert re.search(message, result.stderr), result.stderr
    assert "Traceback" not in result.stderr


def test_bad_probe_file_names_the_field(python: str, python_env: dict[str, str],
                                        base_args: list[str], tmp_path: pathlib.Path) -> None:
    probes = tmp_path / "probes.yaml"
    probes.write_text("probes:\n  - name: web\n    type: http\n    conditionType: WebReady\n"
                      "    http: {url: 'ftp://10.0.0.1/'}\n")
    result = _run(python, python_env, *base_args, "--probe-config", str(probes))
    assert result.returncode == 2
    assert "probes[0].http.url" in result.stderr
    assert "Traceback" not in result.stderr


def test_dns_name_member_address_refused(python: str, python_env: dict[str, str],
                                         env: environment.LocalEnvironment,
                                         tmp_path: pathlib.Path) -> None:
    kubeconfig = yaml.safe_load(env.kubeconfig("member1").read_text())
    server = kubeconfig["clusters"][0]["cluster"]["server"]
    kubeconfig["clusters"][0]["cluster"]["server"] = server.replace("127.0.1.1", "localhost")
    path = tmp_path / "member.kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))
    result = _run(python, python_env, "--kubeconfig", str(path),
                  "--karmada-kubeconfig", str(env.kubeconfig()),
                  "--cluster-name", "member1", "--host-name", "node-x")
    assert result.returncode == 2
    assert "'localhost' is a DNS name" in result.stderr


def test_missing_node_and_unreadable_kubeconfig(python: str, python_env: dict[str, str],
                                                base_args: list[str],
                                                tmp_path: pathlib.Path) -> None:
    result = _run(python, python_env, *base_args)
    assert result.returncode == 1
    assert "node 'node-x' does not exist" in result.stderr
    result = _run(python, python_env, *base_args[:-6], "--kubeconfig", str(tmp_path / "nope"),
                  "--cluster-name", "member1", "--host-name", "n")
    assert result.returncode == 2
    assert "cannot read kubeconfig" in result.stderr
