"""Control-plane tests: this folder is on ``sys.path`` for ``cpkit`` (the shared helpers)."""

from __future__ import annotations

import pathlib

import pytest
import yaml


@pytest.fixture
def kubeconfig(tmp_path: pathlib.Path) -> str:
    """A kubeconfig pointing at an unreachable control plane (for flag parsing only)."""
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "cp",
        "clusters": [{"name": "cp", "cluster": {"server": "https://127.0.0.1:1",
                                                "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "cp", "context": {"cluster": "cp", "user": "u"}}]}))
    return str(path)
