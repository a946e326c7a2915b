"""A credential plugin written by the tests, and kubeconfigs that use it.

The plugin is a real executable (a Python script) that appends one line per
run to a file -- the count cannot lose a concurrent run -- records what it
was given (arguments, environment, ``KUBERNETES_EXEC_INFO``), and answers
as its environment tells it: tokens per run, an expiry, or a failure.
"""

from __future__ import annotations

import json
import pathlib
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from clusterhealth_core.kube import execplugin

PLUGIN = '''#!{python}
"""Test credential plugin: see tests/core/execkit.py."""
import datetime, json, os, sys, time

state = os.environ["PLUGIN_STATE"]
with open(os.path.join(state, "runs"), "a") as runs:
    runs.write(f"{{os.getpid()}}\\n")
with open(os.path.join(state, "runs")) as runs:
    n = len(runs.read().splitlines())
with open(os.path.join(state, f"run-{{n}}.json"), "w") as record:
    json.dump({{"argv": sys.argv[1:], "env": dict(os.environ)}}, record)
print(f"plugin run {{n}}", file=sys.stderr)
time.sleep(float(os.environ.get("PLUGIN_DELAY", "0")))
mode = os.environ.get("PLUGIN_MODE", "token")
if mode == "fail":
    print("error: getting credentials: AccessDenied: the role cannot be assumed", file=sys.stderr)
    sys.exit(3)
if mode == "garbage":
    print("<html>please log in</html>")
    sys.exit(0)
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
tokens = os.environ.get("PLUGIN_TOKENS", "").split(",")
token = tokens[min(n, len(tokens)) - 1] if tokens != [""] else f"token-{{n}}"
status = {{"token": token}}
if mode == "cert-only":
    status = {{"clientCertificateData": "-----BEGIN CERTIFICATE-----",
              "clientKeyData": "-----BEGIN PRIVATE KEY-----"}}
if mode == "no-status":
    status = None
if mode == "empty-token":
    status = {{"token": ""}}
if "PLUGIN_EXPIRES_IN" in os.environ:
    expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(
        seconds=float(os.environ["PLUGIN_EXPIRES_IN"]))
    status["expirationTimestamp"] = expires.strftime("%Y-%m-%dT%H:%M:%SZ")
answer = {{"apiVersion": os.environ.get("PLUGIN_ANSWER_VERSION", info["apiVersion"]),
          "kind": "ExecCredential"}}
if status is not None:
    answer["status"] = status
print(json.dumps(answer))
'''


class Plugin:
    """The plugin script and its state directory."""

    def __init__(self, directory: pathlib.Path, name: str = "get-token") -> None:
        self.directory = directory
        self.state = directory / "state"
        self.state.mkdir(parents=True, exist_ok=True)
        self.path = directory / name
        self.path.write_text(PLUGIN.format(python=sys.executable))
        self.path.chmod(0o755)

    def runs(self) -> int:
        """How many times the plugin was started."""
        runs = self.state / "runs"
        return len(runs.read_text().splitlines()) if runs.exists() else 0

    def pids(self) -> list[int]:
        """The process id of each run."""
        runs = self.state / "runs"
        return [int(line) for line in runs.read_text().splitlines()] if runs.exists() else []

    def record(self, run: int) -> dict[str, Any]:
        """What run number ``run`` (from 1) was given: ``argv`` and ``env``."""
        result: dict[str, Any] = json.loads((self.state / f"run-{run}.json").read_text())
        return result

    def exec_info(self, run: int) -> dict[str, Any]:
        """The ``KUBERNETES_EXEC_INFO`` run number ``run`` got."""
        info: dict[str, Any] = json.loads(self.record(run)["env"]["KUBERNETES_EXEC_INFO"])
        return info

    def section(
        self,
        *,
        api_version: str = execplugin.V1,
        tokens: Sequence[str] = (),
        expires_in: float | None = None,
        mode: str = "token",
        delay: float = 0.0,
        command: str | None = None,
        env: Mapping[str, str] | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """A kubeconfig ``exec`` section running this plugin."""
        variables = {"PLUGIN_STATE": str(self.state), "PLUGIN_MODE": mode,
                     "PLUGIN_DELAY": str(delay)}
        if tokens:
            variables["PLUGIN_TOKENS"] = ",".join(tokens)
        if expires_in is not None:
            variables["PLUGIN_EXPIRES_IN"] = str(expires_in)
        variables.update(env or {})
        section: dict[str, Any] = {
            "apiVersion": api_version,
            "command": command or str(self.path),
            "env": [{"name": k, "value": v} for k, v in variables.items()],
        }
        if api_version == execplugin.V1:
            section["interactiveMode"] = "Never"
        section.update(fields)
        return section


def write_kubeconfig(
    path: pathlib.Path,
    *,
    clusters: Mapping[str, Mapping[str, Any]] | None = None,
    users: Mapping[str, Mapping[str, Any]] | None = None,
    contexts: Mapping[str, Mapping[str, Any]] | None = None,
    current: str | None = None,
) -> pathlib.Path:
    """Write a kubeconfig with the given named entries."""
    document: dict[str, Any] = {"apiVersion": "v1", "kind": "Config"}
    if clusters is not None:
        document["clusters"] = [{"name": n, "cluster": dict(b)} for n, b in clusters.items()]
    if users is not None:
        document["users"] = [{"name": n, "user": dict(b)} for n, b in users.items()]
    if contexts is not None:
        document["contexts"] = [{"name": n, "context": dict(b)} for n, b in contexts.items()]
    if current is not None:
        document["current-context"] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def single(path: pathlib.Path, server: str, cluster: Mapping[str, Any] | None = None,
           user: Mapping[str, Any] | None = None,
           context: Mapping[str, Any] | None = None) -> pathlib.Path:
    """A kubeconfig with one cluster ``c``, one user ``u`` and context ``dev`` (current)."""
    return write_kubeconfig(
        path,
        clusters={"c": {"server": server, **(cluster or {})}},
        users={"u": dict(user or {"token": "t0ken"})},
        contexts={"dev": {"cluster": "c", "user": "u", **(context or {})}},
        current="dev",
    )
