"""Load the CustomResourceDefinitions shipped in the ``clusterhealth-crds`` chart.

The chart's ``crds/`` folder is the single copy of the CRDs: Helm installs it,
the local environment installs it through :func:`load_crds`, and the API tests
check it against the models.
"""

import os
import pathlib
from typing import Any

import yaml

CRD_DIR_ENV = "CLUSTERHEALTH_CRD_DIR"
"""Environment variable overriding where the CRD YAML files are read from."""


def default_crd_dir() -> pathlib.Path:
    """``$CLUSTERHEALTH_CRD_DIR``, else ``<repo>/charts/clusterhealth-crds/crds``.

    The repository root is found from this file's location
    (``<repo>/core/clusterhealth_core/api/crds.py``), so this default works in a
    checkout or an editable install; other installs must set the variable.
    """
    env = os.environ.get(CRD_DIR_ENV)
    if env:
        return pathlib.Path(env)
    return pathlib.Path(__file__).resolve().parents[3] / "charts" / "clusterhealth-crds" / "crds"


def load_crds(chart_dir: pathlib.Path | None = None) -> list[dict[str, Any]]:
    """Read every CRD document from ``*.yaml`` files, sorted by file name.

    ``chart_dir`` may be the chart directory (its ``crds/`` subfolder is read)
    or the ``crds/`` folder itself; None means :func:`default_crd_dir`.  Raises
    FileNotFoundError when the folder or its CRDs are missing and ValueError when
    a document is not an ``apiextensions.k8s.io/v1`` CustomResourceDefinition.
    """
    directory = default_crd_dir() if chart_dir is None else pathlib.Path(chart_dir)
    if (directory / "crds").is_dir():
        directory = directory / "crds"
    if not directory.is_dir():
        raise FileNotFoundError(
            f"CRD directory {directory} does not exist (set {CRD_DIR_ENV} to the chart's crds/)"
        )
    crds: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.yaml")):
        with path.open(encoding="utf-8") as stream:
            for document in yaml.safe_load_all(stream):
                if document is None:
                    continue
                if (
                    not isinstance(document, dict)
                    or document.get("apiVersion") != "apiextensions.k8s.io/v1"
                    or document.get("kind") != "CustomResourceDefinition"
                ):
                    raise ValueError(f"{path}: not an apiextensions.k8s.io/v1 CRD document")
                crds.append(document)
    if not crds:
        raise FileNotFoundError(f"no CustomResourceDefinition found in {directory}")
    return crds
