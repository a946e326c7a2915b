"""``make demo`` runs end to end: environment, agents, a DNS failure detected and cleared."""

from __future__ import annotations

import subprocess


def test_demo_scenario(python: str, python_env: dict[str, str]) -> None:
    result = subprocess.run(
        [python, "-m", "clusterhealth_localenv.demo", "--duration", "1"],
        capture_output=True, text=True, env=python_env, timeout=240, check=False,
    )
    out = result.stdout
    assert result.returncode == 0, result.stderr[-2000:]
    assert "member1: DNS failure detected" in out, out
    assert "member1: DNS healthy again" in out, out
    assert "member1: Remedy dns-failure added TrafficControl" in out, out
    assert "member1: TrafficControl cleared" in out, out
    assert "remedyActions: - -> TrafficControl" in out
    assert "-> False (ServiceDomainNameResolutionFailed" in out
    assert "environment stopped" in out
