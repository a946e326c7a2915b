"""Provision the real Kubernetes binaries the local environment runs.

``kube-apiserver`` and ``etcd`` are built from the Go module proxy: a small
generated ``go.mod`` requires ``k8s.io/kubernetes`` at a pinned release and
pins every ``k8s.io/<staging>`` module with a ``replace`` line (upstream's own
``go.mod`` replaces them with local paths, which is why ``go install ...@v``
fails).  etcd is built in the same module at the exact version Kubernetes
itself requires, so the pair is always compatible.  ``helm`` is built from
``helm.sh/helm/v3``.

Binaries are cached outside the work tree, keyed by version, so a second run
never rebuilds.  A missing Go toolchain or an unreachable proxy is reported as
one clear :class:`ProvisionError`, never a silent skip.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator

KUBERNETES_VERSION = "v1.34.4"
HELM_VERSION = "v3.19.5"
GOPROXY_DEFAULT = "https://proxy.golang.org"

_MOD_FLAGS = "-buildvcs=false -mod=mod"
_REPLACE_LINE = re.compile(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", re.MULTILINE)
_ETCD_REQUIRE = re.compile(r"^\s*(go\.etcd\.io/etcd/server/v3)\s+(v[\w.+-]+)", re.MULTILINE)


class ProvisionError(RuntimeError):
    """A binary could not be provided; the message says what is missing."""


@dataclasses.dataclass(frozen=True)
class Binaries:
    """Paths of the provisioned executables."""

    kube_apiserver: pathlib.Path
    etcd: pathlib.Path


def cache_root() -> pathlib.Path:
    """Where binaries live: ``$CLUSTERHEALTH_CACHE`` or ``~/.cache/clusterhealth``."""
    env = os.environ.get("CLUSTERHEALTH_CACHE")
    if env:
        return pathlib.Path(env)
    return pathlib.Path.home() / ".cache" / "clusterhealth"


def _go() -> str:
    go = shutil.which("go")
    if go is not None:
        return go
    for candidate in ("/usr/local/go/bin/go", "/usr/lib/go/bin/go"):
        if os.access(candidate, os.X_OK):
            return candidate
    raise ProvisionError(
        "the Go toolchain is missing: install Go >= 1.24 (it builds kube-apiserver, "
        "etcd and helm from the Go module proxy)"
    )


def _proxy_url() -> str:
    proxy = os.environ.get("GOPROXY", GOPROXY_DEFAULT).split(",")[0]
    return proxy if proxy.startswith("http") else GOPROXY_DEFAULT


def _fetch_mod(module: str, version: str) -> str:
    url = f"{_proxy_url()}/{module}/@v/{version}.mod"
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return bytes(response.read()).decode()
    except (urllib.error.URLError, TimeoutError) as exc:
        raise ProvisionError(f"the Go module proxy is unreachable ({url}): {exc}") from exc


def kubernetes_gomod(version: str, upstream_mod: str) -> str:
    """Render the go.mod that builds ``k8s.io/kubernetes`` commands at ``version``.

    Every staging module upstream replaces with a local path is pinned to the
    matching ``v0.N.M`` release instead; etcd is required at upstream's version.
    """
    staging = sorted(set(_REPLACE_LINE.findall(upstream_mod)))
    if not staging:
        raise ProvisionError(f"k8s.io/kubernetes {version}: no staging modules in its go.mod")
    match = re.fullmatch(r"v1\.(\d+)\.(\d+)", version)
    if match is None:
        raise ProvisionError(f"unsupported Kubernetes version {version!r} (want v1.N.M)")
    staging_version = f"v0.{match.group(1)}.{match.group(2)}"
    lines = [
        "module clusterhealth.local/kubebuild",
        "",
        "go 1.24.0",
        "",
        "require (",
        f"\tk8s.io/kubernetes {version}",
    ]
    etcd = _ETCD_REQUIRE.search(upstream_mod)
    if etcd is not None:
        lines.append(f"\t{etcd.group(1)} {etcd.group(2)}")
    lines += [")", "", "replace ("]
    lines += [f"\t{module} => {module} {staging_version}" for module in staging]
    lines += [")", ""]
    return "\n".join(lines)


def _run(
    args: list[str], cwd: pathlib.Path, what: str, goflags: str,
    gobin: pathlib.Path | None = None,
) -> None:
    # Add to the caller's GOFLAGS (e.g. -modcacherw), never replace them.
    flags = " ".join(f for f in (os.environ.get("GOFLAGS", ""), goflags) if f)
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": flags}
    if gobin is not None:
        env["GOBIN"] = str(gobin)
    print(f"clusterhealth: building {what} (first run only; cached afterwards)", file=sys.stderr)
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout)[-3000:]
        raise ProvisionError(f"building {what} failed ({' '.join(args)}):\n{tail}")


def _version_ldflags(version: str) -> str:
    """Stamp the release into the binary, as upstream's build does, so /version is right."""
    major, minor = version.lstrip("v").split(".")[:2]
    pkg = "k8s.io/component-base/version"
    return " ".join(
        f"-X {pkg}.{key}={value}"
        for key, value in (
            ("gitVersion", version), ("gitMajor", major), ("gitMinor", minor),
            ("gitTreeState", "clean"), ("buildDate", "1970-01-01T00:00:00Z"),
        )
    )


def _build_kubernetes(version: str, out_dir: pathlib.Path) -> None:
    go = _go()
    upstream = _fetch_mod("k8s.io/kubernetes", version)
    with tempfile.TemporaryDirectory(prefix="clusterhealth-kubebuild-") as tmp:
        work = pathlib.Path(tmp)
        (work / "go.mod").write_text(kubernetes_gomod(version, upstream))
        (work / "tools.go").write_text(
            "//go:build tools\n\npackage tools\n\nimport (\n"
            '\t_ "k8s.io/kubernetes/cmd/kube-apiserver"\n'
            '\t_ "go.etcd.io/etcd/server/v3"\n)\n'
        )
        _run([go, "mod", "tidy"], work, f"k8s.io/kubernetes {version} go.mod", _MOD_FLAGS)
        partial = out_dir.with_name(out_dir.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        for output, package, ldflags in (
            ("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver", _version_ldflags(version)),
            ("etcd", "go.etcd.io/etcd/server/v3", ""),
        ):
            _run(
                [go, "build", "-trimpath", f"-ldflags=-s -w {ldflags}".strip(),
                 "-o", str(partial / output), package],
                work, f"{output} for Kubernetes {version}", _MOD_FLAGS,
            )
        partial.rename(out_dir)


@contextlib.contextmanager
def _build_lock(name: str) -> Iterator[None]:
    """One build of ``name`` at a time across processes (tests, demo, bench)."""
    lock_dir = cache_root() / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with (lock_dir / f"{name}.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_kubernetes(version: str = KUBERNETES_VERSION) -> Binaries:
    """Return cached ``kube-apiserver`` and ``etcd``, building them on first use."""
    out_dir = cache_root() / "bin" / f"kubernetes-{version}"
    binaries = Binaries(out_dir / "kube-apiserver", out_dir / "etcd")
    if binaries.kube_apiserver.exists() and binaries.etcd.exists():
        return binaries
    with _build_lock(out_dir.name):
        if not (binaries.kube_apiserver.exists() and binaries.etcd.exists()):
            out_dir.parent.mkdir(parents=True, exist_ok=True)
            _build_kubernetes(version, out_dir)
    return binaries


def ensure_helm(version: str = HELM_VERSION) -> pathlib.Path:
    """Return a cached ``helm`` binary, building it from the Go module proxy."""
    helm = cache_root() / "bin" / f"helm-{version}" / "helm"
    if helm.exists():
        return helm
    go = _go()
    with _build_lock(f"helm-{version}"), \
            tempfile.TemporaryDirectory(prefix="clusterhealth-helmbuild-") as tmp:
        if helm.exists():
            return helm
        gobin = pathlib.Path(tmp) / "bin"
        _run(
            [go, "install", "-trimpath", "-ldflags=-s -w", f"helm.sh/helm/v3/cmd/helm@{version}"],
            pathlib.Path(tmp), f"helm {version}", "-buildvcs=false", gobin=gobin,
        )
        helm.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(gobin / "helm"), helm)
    return helm


def main() -> int:
    """Provision every binary and print where it is."""
    try:
        binaries = ensure_kubernetes()
        helm = ensure_helm()
    except ProvisionError as exc:
        print(f"clusterhealth: {exc}", file=sys.stderr)
        return 1
    print(f"kube-apiserver: {binaries.kube_apiserver}")
    print(f"etcd:           {binaries.etcd}")
    print(f"helm:           {helm}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
