"""The command is a kubectl plugin: ``kubectl-clusterhealth`` on PATH, run by ``kubectl``.

kubectl runs ``kubectl clusterhealth ARGS`` as the first executable named
``kubectl-clusterhealth`` on ``PATH``, with ARGS.  The installation puts that
script next to the venv's Python; the usage text names the plugin form.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

from clusterhealth_cli import errors
from clusterhealth_localenv import binaries

BIN = pathlib.Path(sys.executable).parent
REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "examples" / "remedy-tests" / "remedy-test.yaml"


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=False,
                          env=env)


def test_the_plugin_resolves_on_the_venv_path() -> None:
    found = shutil.which("kubectl-clusterhealth", path=str(BIN))
    assert found == str(BIN / "kubectl-clusterhealth")
    done = run(found, "--help")
    assert done.returncode == errors.OK, done.stderr
    assert done.stdout.startswith("usage: kubectl clusterhealth [-h] [--version] COMMAND ...")
    done = run(found, "remedy", "test", "--help")
    assert done.stdout.startswith("usage: kubectl clusterhealth remedy test [-h] FILE [FILE ...]")
    # the same program under its own name
    done = run(str(BIN / "clusterhealth"), "--help")
    assert done.stdout.startswith("usage: clusterhealth [-h] [--version] COMMAND ...")


def test_through_kubectl() -> None:
    # a real kubectl of the API servers' version, built once from the Go module proxy
    kubectl = str(binaries.ensure_kubectl())
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = run(kubectl, "clusterhealth", "--help", env=env)
    assert done.returncode == errors.OK, done.stderr
    assert done.stdout.startswith("usage: kubectl clusterhealth [-h] [--version] COMMAND ...")
    done = run(kubectl, "clusterhealth", "remedy", "test", str(EXAMPLE), env=env)
    assert done.returncode == errors.OK, done.stdout + done.stderr
    assert done.stdout.endswith("6 passed, 0 failed (1 file)\n")


def test_kubectl_completes_the_plugin() -> None:
    """kubectl >= 1.26 asks ``kubectl_complete-clusterhealth`` (installed with the package)."""
    kubectl = str(binaries.ensure_kubectl())
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = run(kubectl, "__complete", "clusterhealth", "ex", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "explain"
    done = run(kubectl, "__complete", "clusterhealth", "status", "-o", "", env=env)
    assert done.stdout.splitlines()[:3] == ["json", "text", "yaml"]


def test_bash_completion_script() -> None:
    script = run(str(BIN / "clusterhealth"), "completion", "bash").stdout
    assert "complete -F _clusterhealth clusterhealth kubectl-clusterhealth" in script
    probe = (f"{script}\nCOMP_WORDS=(clusterhealth remedy t); COMP_CWORD=2; _clusterhealth; "
             "echo \"${COMPREPLY[*]}\"; COMP_WORDS=(clusterhealth join x --member-access ''); "
             "COMP_CWORD=4; _clusterhealth; echo \"${COMPREPLY[*]}\"")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = run("bash", "-c", probe, env=env)
    assert done.stdout.splitlines() == ["test", "full scoped"], done.stdout + done.stderr
    zsh = run(str(BIN / "clusterhealth"), "completion", "zsh").stdout
    assert zsh.startswith("#compdef clusterhealth kubectl-clusterhealth") and "bashcompinit" in zsh
