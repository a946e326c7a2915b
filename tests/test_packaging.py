"""The project installs as a wheel (what the Dockerfile does) and its entry points run.

Only the wheel's contents are on the path: no source folder, no editable finder.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import zipfile

REPO = pathlib.Path(__file__).resolve().parents[1]


def test_wheel_installs_and_components_start(tmp_path: pathlib.Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir",
                    str(wheels), str(REPO)], check=True, capture_output=True, timeout=300)
    (wheel,) = wheels.glob("clusterhealth-*.whl")
    with zipfile.ZipFile(wheel) as contents:
        names = contents.namelist()
        assert "clusterhealth_cli/__main__.py" in names
        assert "clusterhealth_core/py.typed" in names
        # the test harness is not the product: not in the wheel, so not in the image
        assert not [n for n in names if n.startswith("clusterhealth_localenv")]
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        # nor are its dependencies (localenv/pyproject.toml names them)
        assert "Provides-Extra: localenv" not in contents.read(metadata).decode()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", str(wheel)], check=True,
                   capture_output=True, timeout=300)
    for module, prog in (("clusterhealth_agent", "clusterhealth-agent"),
                         ("clusterhealth_remedy", "clusterhealth-remedy"),
                         ("clusterhealth_mci", "clusterhealth-mci"),
                         ("clusterhealth_controlplane", "clusterhealth-controlplane")):
        shown = subprocess.run([python, "-m", module, "--help"], capture_output=True, text=True,
                               cwd=tmp_path, timeout=60, check=False)
        assert shown.returncode == 0, shown.stderr
        assert f"usage: {prog}" in shown.stdout
        refused = subprocess.run([python, "-m", module, "--kubeconfig", "/nonexistent"],
                                 capture_output=True, text=True, cwd=tmp_path, timeout=60,
                                 check=False)
        assert refused.returncode == 2
        assert f"{prog}: error:" in refused.stderr
    # the command line, under both of its names (kubectl runs the second as a plugin)
    for script, prog in (("clusterhealth", "clusterhealth"),
                         ("kubectl-clusterhealth", "kubectl clusterhealth")):
        shown = subprocess.run([str(venv / "bin" / script), "--help"], capture_output=True,
                               text=True, cwd=tmp_path, timeout=60, check=False)
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.startswith(f"usage: {prog} ")
