"""Provision the real Kubernetes binaries the local environment runs.

``kube-apiserver`` and ``etcd`` are built from the Go module proxy: a small
generated ``go.mod`` requires ``k8s.io/kubernetes`` at a pinned release and
pins every ``k8s.io/<staging>`` module with a ``replace`` line (upstream's own
``go.mod`` replaces them with local paths, which is why ``go install ...@v``
fails).  etcd is built in the same module at the exact version Kubernetes
itself requires, so the pair is always compatible.  ``helm`` is built from
``helm.sh/helm/v3``.

Clusters whose Nodes run containers (:mod:`.nodes`) add ``kubelet`` and
``kube-proxy`` (the same Kubernetes build), ``coredns`` (``go install`` from
the Go module proxy) and the pause program of Kubernetes' own source
(``build/pause/linux/pause.c`` in the ``k8s.io/kubernetes`` module, compiled
with ``gcc -static`` as its Makefile does).

Karmada's ``karmada-aggregated-apiserver``, ``karmada-controller-manager``,
``karmada-scheduler`` and ``karmada-webhook`` (the local environment's Karmada
control-plane mode) are built the same way from
``github.com/karmada-io/karmada``, with upstream's own ``replace`` directives
copied; Karmada's CRD manifests and its webhook configuration are taken from
that module's source in the Go module cache at build time and kept next to the
binaries.

Every module is verified: ``go mod tidy`` writes the generated module's
``go.sum`` with each module's hash checked against the checksum database
(``sum.golang.org``, reached through the module proxy's ``/sumdb/`` endpoint;
Go checks the database's signed tree with the key built into it, so the proxy
cannot forge an answer), ``go mod verify`` re-hashes the module cache against
it, and the builds run with ``-mod=readonly`` (exactly what ``go.sum`` lists).
``GONOSUMDB``, ``GOPRIVATE``, ``GOINSECURE`` and ``GOFLAGS=-insecure`` are
cleared for the builds, and ``GOSUMDB=off`` is refused (:func:`checksum_env`).

Binaries are cached outside the work tree, keyed by version, so a second run
never rebuilds.  A missing Go toolchain or an unreachable proxy is reported as
one clear :class:`ProvisionError`, never a silent skip.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence

KUBERNETES_VERSION = "v1.34.4"
HELM_VERSION = "v3.19.5"
KWOK_VERSION = "v0.8.0"
KARMADA_VERSION = "v1.18.2"
COREDNS_VERSION = "v1.12.1"
"""The CoreDNS kubeadm v1.34 installs (``CoreDNSVersion`` of its constants)."""
PAUSE_VERSION = "3.10.1"
"""The pause tag of Kubernetes v1.34's ``build/pause/Makefile``."""
KARMADA_MODULE = "github.com/karmada-io/karmada"
KARMADA_CRD_SOURCE = "charts/karmada/_crds/bases"
"""Where Karmada's module keeps its CRD manifests (what its chart and karmadactl install)."""
KARMADA_WEBHOOK_CONFIGURATION = "artifacts/deploy/webhook-configuration.yaml"
"""Karmada's (Mutating|Validating)WebhookConfiguration for ``karmada-webhook``, as its
installers apply it (``{{caBundle}}`` and the Service URL filled in)."""
GOPROXY_DEFAULT = "https://proxy.golang.org"

_MOD_FLAGS = "-buildvcs=false -mod=mod"
"""For ``go mod tidy``: it may write go.mod and go.sum (each new line checked against the
checksum database)."""
_BUILD_FLAGS = "-buildvcs=false -mod=readonly"
"""For ``go build``: exactly the modules ``go.sum`` lists, at the hashes it records."""
_REPLACE_LINE = re.compile(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", re.MULTILINE)
_ETCD_REQUIRE = re.compile(r"^\s*(go\.etcd\.io/etcd/server/v3)\s+(v[\w.+-]+)", re.MULTILINE)
_GO_DIRECTIVE = re.compile(r"^go\s+(\d+\.\d+(?:\.\d+)?)\s*(?://.*)?$", re.MULTILINE)
_REPLACE_BLOCK = re.compile(r"^replace\s*\((.*?)^\)", re.MULTILINE | re.DOTALL)
_REPLACE_SINGLE = re.compile(r"^replace\s+([^(\s].*)$", re.MULTILINE)


class ProvisionError(RuntimeError):
    """A binary could not be provided; the message says what is missing."""


@dataclasses.dataclass(frozen=True)
class Binaries:
    """Paths of the provisioned executables."""

    kube_apiserver: pathlib.Path
    etcd: pathlib.Path


@dataclasses.dataclass(frozen=True)
class WorkloadBinaries:
    """What a member that runs workloads needs beside its API server and etcd."""

    kube_controller_manager: pathlib.Path
    kube_scheduler: pathlib.Path
    kwok: pathlib.Path
    """Simulated kubelets: Nodes and Pods without containers (``sigs.k8s.io/kwok``)."""


@dataclasses.dataclass(frozen=True)
class NodeBinaries:
    """What a Node that runs containers needs from the Go module proxy (and gcc).

    containerd, runc and the CNI plugins come from Debian's packages
    (``scripts/bootstrap.sh``); :mod:`.nodes` finds them.
    """

    kubelet: pathlib.Path
    kube_proxy: pathlib.Path
    coredns: pathlib.Path
    pause: pathlib.Path
    """Kubernetes' pause program, static: the pod sandbox's process (and each Node's init)."""

    def complete(self) -> bool:
        """Whether every file is in place."""
        return all(path.exists() for path in dataclasses.astuple(self))


@dataclasses.dataclass(frozen=True)
class KarmadaBinaries:
    """Paths of Karmada's provisioned executables and of its CRD manifests."""

    aggregated_apiserver: pathlib.Path
    controller_manager: pathlib.Path
    crd_dir: pathlib.Path
    """Every ``*.yaml`` of Karmada's ``charts/karmada/_crds/bases`` (flattened)."""

    def complete(self) -> bool:
        """Whether every file is in place (a finished build)."""
        return (self.aggregated_apiserver.exists() and self.controller_manager.exists()
                and any(self.crd_dir.glob("*.yaml")))

    def crd(self, file_name: str) -> pathlib.Path:
        """One of Karmada's CRD manifests, e.g. ``remedy.karmada.io_remedies.yaml``."""
        path = self.crd_dir / file_name
        if not path.exists():
            raise ProvisionError(f"Karmada CRD {file_name} is not in {self.crd_dir}")
        return path


def cache_root() -> pathlib.Path:
    """Where binaries live: ``$CLUSTERHEALTH_CACHE`` or ``~/.cache/clusterhealth``."""
    env = os.environ.get("CLUSTERHEALTH_CACHE")
    if env:
        return pathlib.Path(env)
    return pathlib.Path.home() / ".cache" / "clusterhealth"


def go_tool() -> str:
    """The ``go`` command: on PATH, else where Go's installers put it."""
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


def checksum_env(environ: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """The Go environment that verifies every module against the checksum database.

    ``GOSUMDB`` stays as given (another database, e.g. a mirror's, is checked
    the same way) but ``off`` is a :class:`ProvisionError`; the variables that
    exempt modules from the check are cleared, and ``-insecure`` is refused.
    """
    sumdb = environ.get("GOSUMDB", "").strip() or "sum.golang.org"
    if sumdb == "off":
        raise ProvisionError("GOSUMDB=off turns off Go's checksum database: the builds verify "
                             "every module against sum.golang.org (unset GOSUMDB)")
    if "-insecure" in environ.get("GOFLAGS", "").split():
        raise ProvisionError("GOFLAGS=-insecure: the builds fetch and verify modules securely "
                             "only (remove -insecure)")
    return {"GOSUMDB": sumdb, "GONOSUMDB": "", "GOPRIVATE": "", "GOINSECURE": "",
            "GOFLAGS": environ.get("GOFLAGS", "")}


def _run(
    args: list[str], cwd: pathlib.Path, what: str, goflags: str,
    gobin: pathlib.Path | None = None,
) -> None:
    verified = checksum_env(os.environ)
    # Add to the caller's GOFLAGS (e.g. -modcacherw), never replace them; ours come last.
    flags = " ".join(f for f in (verified.pop("GOFLAGS"), goflags) if f)
    env = {**os.environ, **verified, "CGO_ENABLED": "0", "GOFLAGS": flags}
    if gobin is not None:
        env["GOBIN"] = str(gobin)
    print(f"clusterhealth: building {what} (first run only; cached afterwards)", file=sys.stderr)
    nice = shutil.which("nice")
    argv = [nice, "-n", "10", *args] if nice is not None else args  # a shared machine
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
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


def _build_kubernetes(version: str, out_dir: pathlib.Path,
                      outputs: Sequence[tuple[str, str]]) -> None:
    """Build ``(binary, Go package)`` pairs of Kubernetes ``version`` into ``out_dir``.

    Packages of ``k8s.io/kubernetes`` get the release stamped in (``/version``).
    """
    go = go_tool()
    upstream = _fetch_mod("k8s.io/kubernetes", version)
    with tempfile.TemporaryDirectory(prefix="clusterhealth-kubebuild-") as tmp:
        work = pathlib.Path(tmp)
        (work / "go.mod").write_text(kubernetes_gomod(version, upstream))
        imports = "".join(f'\t_ "{package}"\n' for _, package in outputs)
        (work / "tools.go").write_text(
            f"//go:build tools\n\npackage tools\n\nimport (\n{imports})\n")
        _run([go, "mod", "tidy"], work, f"k8s.io/kubernetes {version} go.mod", _MOD_FLAGS)
        _run([go, "mod", "verify"], work, f"k8s.io/kubernetes {version} modules", _BUILD_FLAGS)
        partial = out_dir.with_name(out_dir.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        for output, package in outputs:
            ldflags = _version_ldflags(version) if package.startswith("k8s.io/kubernetes/") \
                else ""
            _run(
                [go, "build", "-trimpath", f"-ldflags=-s -w {ldflags}".strip(),
                 "-o", str(partial / output), package],
                work, f"{output} for Kubernetes {version}", _BUILD_FLAGS,
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
            _build_kubernetes(version, out_dir, (
                ("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"),
                ("etcd", "go.etcd.io/etcd/server/v3"),
            ))
    return binaries


def ensure_workload_parts(version: str = KUBERNETES_VERSION,
                          kwok_version: str = KWOK_VERSION) -> WorkloadBinaries:
    """Return cached ``kube-controller-manager``, ``kube-scheduler`` and ``kwok``.

    What a member that runs workloads needs beside its API server: the first
    two built from ``k8s.io/kubernetes`` at the API server's version, kwok
    (simulated kubelets) with ``go install`` from the module proxy.
    """
    out_dir = cache_root() / "bin" / f"kubernetes-{version}-workloads"
    kwok = cache_root() / "bin" / f"kwok-{kwok_version}" / "kwok"
    parts = WorkloadBinaries(out_dir / "kube-controller-manager", out_dir / "kube-scheduler",
                             kwok)
    if not (parts.kube_controller_manager.exists() and parts.kube_scheduler.exists()):
        with _build_lock(out_dir.name):
            if not (parts.kube_controller_manager.exists() and parts.kube_scheduler.exists()):
                out_dir.parent.mkdir(parents=True, exist_ok=True)
                _build_kubernetes(version, out_dir, (
                    ("kube-controller-manager", "k8s.io/kubernetes/cmd/kube-controller-manager"),
                    ("kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler"),
                ))
    if not kwok.exists():
        _go_install(f"sigs.k8s.io/kwok/cmd/kwok@{kwok_version}", kwok)
    return parts


def node_binaries(version: str = KUBERNETES_VERSION,
                  coredns_version: str = COREDNS_VERSION) -> NodeBinaries:
    """Where the Node parts of these versions live in the cache (built or not)."""
    root = cache_root() / "bin"
    out_dir = root / f"kubernetes-{version}-nodes"
    return NodeBinaries(out_dir / "kubelet", out_dir / "kube-proxy",
                        root / f"coredns-{coredns_version}" / "coredns",
                        out_dir / "pause")


def ensure_node_parts(version: str = KUBERNETES_VERSION,
                      coredns_version: str = COREDNS_VERSION) -> NodeBinaries:
    """Return cached ``kubelet``, ``kube-proxy``, ``coredns`` and ``pause``, built on first use.

    kubelet and kube-proxy come from ``k8s.io/kubernetes`` at the API server's
    version; ``pause`` is compiled from that module's ``build/pause/linux/pause.c``
    (``gcc -static``, Debian's gcc and libc6-dev); CoreDNS is ``go install``ed.
    """
    parts = node_binaries(version, coredns_version)
    out_dir = parts.kubelet.parent
    if not (parts.kubelet.exists() and parts.kube_proxy.exists() and parts.pause.exists()):
        with _build_lock(out_dir.name):
            if not (parts.kubelet.exists() and parts.kube_proxy.exists()
                    and parts.pause.exists()):
                out_dir.parent.mkdir(parents=True, exist_ok=True)
                staging = out_dir.with_name(out_dir.name + ".build")
                shutil.rmtree(staging, ignore_errors=True)
                _build_kubernetes(version, staging, (
                    ("kubelet", "k8s.io/kubernetes/cmd/kubelet"),
                    ("kube-proxy", "k8s.io/kubernetes/cmd/kube-proxy"),
                ))
                _build_pause(version, staging / "pause")
                shutil.rmtree(out_dir, ignore_errors=True)
                staging.rename(out_dir)
    if not parts.coredns.exists():
        _go_install(f"github.com/coredns/coredns@{coredns_version}", parts.coredns)
    return parts


def _build_pause(version: str, output: pathlib.Path) -> None:
    """Compile Kubernetes' ``build/pause/linux/pause.c`` of ``version``, static."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise ProvisionError("gcc is missing: install Debian packages gcc and libc6-dev "
                             "(they compile Kubernetes' pause program)")
    with tempfile.TemporaryDirectory(prefix="clusterhealth-pause-") as tmp:
        info = _download_module(go_tool(), "k8s.io/kubernetes", version, pathlib.Path(tmp))
        source = pathlib.Path(str(info["Dir"])) / "build" / "pause" / "linux" / "pause.c"
        if not source.exists():
            raise ProvisionError(f"k8s.io/kubernetes {version} has no {source}")
        proc = subprocess.run(
            [gcc, "-Os", "-Wall", "-Werror", "-static", f"-DVERSION=v{PAUSE_VERSION}",
             "-o", str(output), str(source)],
            capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise ProvisionError(f"compiling {source} failed (install libc6-dev for a static "
                                 f"libc):\n{proc.stderr[-2000:]}")
        strip = shutil.which("strip")
        if strip is not None:
            subprocess.run([strip, str(output)], check=False, capture_output=True)


def ensure_kubectl(version: str = KUBERNETES_VERSION) -> pathlib.Path:
    """Return a cached ``kubectl`` of the API server's version, built on first use.

    For what a user does with kubectl: its plugin mechanism runs ``kubectl
    clusterhealth`` (the tests run the command through a real kubectl).
    """
    out_dir = cache_root() / "bin" / f"kubernetes-{version}-kubectl"
    kubectl = out_dir / "kubectl"
    if not kubectl.exists():
        with _build_lock(out_dir.name):
            if not kubectl.exists():
                out_dir.parent.mkdir(parents=True, exist_ok=True)
                _build_kubernetes(version, out_dir, (
                    ("kubectl", "k8s.io/kubernetes/cmd/kubectl"),))
    return kubectl


def ensure_go_program(source: pathlib.Path, name: str) -> pathlib.Path:
    """Build the Go main package in ``source`` (its own ``go.mod``) once; return the binary.

    For programs kept outside this repository, such as the peer harness's
    wrapper of Karmada's remedy controller (``../shared/peer/remedy``).  The
    source is copied to a scratch folder (the build writes ``go.sum``), and the
    binary is cached by a hash of the source files, so an edited source is
    rebuilt.
    """
    files = sorted(p for p in source.rglob("*")
                   if p.is_file() and (p.suffix in {".go", ".mod"} or p.name == "go.sum"))
    if not any(p.name == "go.mod" for p in files):
        raise ProvisionError(f"{source} has no go.mod: not a Go module to build {name} from")
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(source)).encode() + b"\0" + path.read_bytes())
    out_dir = cache_root() / "bin" / f"{name}-{digest.hexdigest()[:12]}"
    binary = out_dir / name
    if binary.exists():
        return binary
    with _build_lock(out_dir.name):
        if not binary.exists():
            go = go_tool()
            with tempfile.TemporaryDirectory(prefix=f"clusterhealth-{name}-") as tmp:
                work = pathlib.Path(tmp) / "src"
                shutil.copytree(source, work)
                partial = pathlib.Path(tmp) / name
                if not (work / "go.sum").exists():  # a committed go.sum is used as it is
                    _run([go, "mod", "tidy"], work, f"{name} go.mod", _MOD_FLAGS)
                _run([go, "mod", "verify"], work, f"{name} modules", _BUILD_FLAGS)
                _run([go, "build", "-trimpath", "-ldflags=-s -w", "-o", str(partial), "."],
                     work, name, _BUILD_FLAGS)
                out_dir.mkdir(parents=True, exist_ok=True)
                shutil.move(partial, binary)
    return binary


def _go_install(package: str, binary: pathlib.Path) -> None:
    """``go install package@version`` once, the result moved to ``binary``."""
    go = go_tool()
    with _build_lock(binary.parent.name), \
            tempfile.TemporaryDirectory(prefix="clusterhealth-goinstall-") as tmp:
        if binary.exists():
            return
        gobin = pathlib.Path(tmp) / "bin"
        _run([go, "install", "-trimpath", "-ldflags=-s -w", package],
             pathlib.Path(tmp), package, "-buildvcs=false", gobin=gobin)
        binary.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(gobin / binary.name), binary)


def ensure_helm(version: str = HELM_VERSION) -> pathlib.Path:
    """Return a cached ``helm`` binary, building it from the Go module proxy."""
    helm = cache_root() / "bin" / f"helm-{version}" / "helm"
    if not helm.exists():
        _go_install(f"helm.sh/helm/v3/cmd/helm@{version}", helm)
    return helm


REGISTRY_VERSION = "v3.0.0"
"""The OCI registry (CNCF Distribution) the chart tests push to and pull from."""


def ensure_registry(version: str = REGISTRY_VERSION) -> pathlib.Path:
    """Return a cached ``registry`` (github.com/distribution/distribution), built once."""
    registry = cache_root() / "bin" / f"registry-{version}" / "registry"
    if not registry.exists():
        _go_install(f"github.com/distribution/distribution/v3/cmd/registry@{version}",
                    registry)
    return registry


def upstream_replaces(upstream_mod: str) -> list[str]:
    """The ``replace`` directives of an upstream go.mod, one ``old => new`` per entry.

    Only module-to-module replacements can be carried into another module; a
    replacement by a local path (as Kubernetes' staging modules) cannot, and
    is a :class:`ProvisionError`.
    """
    entries: list[str] = []
    for block in _REPLACE_BLOCK.findall(upstream_mod):
        entries += [line.split("//")[0].strip() for line in block.splitlines()]
    entries += [line.split("//")[0].strip() for line in _REPLACE_SINGLE.findall(upstream_mod)]
    entries = [entry for entry in entries if entry]
    for entry in entries:
        target = entry.split("=>", 1)[-1].strip()
        if target.startswith(("./", "../", "/")):
            raise ProvisionError(f"upstream replaces a module by a local path ({entry})")
    return entries


def karmada_gomod(version: str, upstream_mod: str) -> str:
    """Render the go.mod that builds Karmada's commands at ``version``.

    It requires ``github.com/karmada-io/karmada`` only (``go mod tidy`` adds
    the rest at upstream's versions) and repeats upstream's ``replace``
    directives, which a dependent module would otherwise ignore.
    """
    if re.fullmatch(r"v\d+\.\d+\.\d+", version) is None:
        raise ProvisionError(f"unsupported Karmada version {version!r} (want vN.N.N)")
    go = _GO_DIRECTIVE.search(upstream_mod)
    lines = [
        "module clusterhealth.local/karmadabuild",
        "",
        f"go {go.group(1) if go is not None else '1.24.0'}",
        "",
        f"require {KARMADA_MODULE} {version}",
        "",
    ]
    replaces = upstream_replaces(upstream_mod)
    if replaces:
        lines += ["replace (", *(f"\t{entry}" for entry in replaces), ")", ""]
    return "\n".join(lines)


def _karmada_ldflags(version: str, commit: str) -> str:
    """Stamp the release into the binaries as Karmada's ``hack/util.sh`` does."""
    pkg = f"{KARMADA_MODULE}/pkg/version"
    stamps = [("gitVersion", version), ("gitTreeState", "clean"),
              ("buildDate", "1970-01-01T00:00:00Z")]
    if commit:
        stamps += [("gitCommit", commit), ("gitShortCommit", commit[:9])]
    return " ".join(f"-X {pkg}.{key}={value}" for key, value in stamps)


def _download_module(go: str, module: str, version: str, cwd: pathlib.Path) -> dict[str, object]:
    """``go mod download -json module@version``: where the module cache holds it."""
    verified = checksum_env(os.environ)
    verified["GOFLAGS"] = " ".join(f for f in verified["GOFLAGS"].split()
                                   if not f.startswith("-mod="))  # outside any module
    env = {**os.environ, **verified, "GO111MODULE": "on"}
    proc = subprocess.run(
        [go, "mod", "download", "-json", f"{module}@{version}"],
        cwd=cwd, env=env, capture_output=True, text=True, check=False,
    )
    try:
        info: dict[str, object] = json.loads(proc.stdout) if proc.stdout.strip() else {}
    except ValueError:
        info = {}
    if proc.returncode != 0 or info.get("Error") or not info.get("Dir"):
        detail = str(info.get("Error") or proc.stderr or proc.stdout).strip()[-2000:]
        raise ProvisionError(
            f"cannot download {module}@{version} from the Go module proxy "
            f"({_proxy_url()}): {detail}"
        )
    return info


def _copy_karmada_crds(module_dir: pathlib.Path, crd_dir: pathlib.Path) -> None:
    source = module_dir / KARMADA_CRD_SOURCE
    files = sorted(source.rglob("*.yaml"))
    if not files:
        raise ProvisionError(f"no CRD manifests under {source}")
    crd_dir.mkdir(parents=True, exist_ok=True)
    for path in files:
        target = crd_dir / path.name
        if target.exists():
            raise ProvisionError(f"two Karmada CRD files are named {path.name}")
        shutil.copyfile(path, target)  # the module cache is read-only; the copy is not
        target.chmod(0o644)


def _build_karmada(version: str, out_dir: pathlib.Path,
                   commands: Sequence[str] = ("aggregated-apiserver", "controller-manager"),
                   crds: bool = True, files: Sequence[str] = ()) -> None:
    """Build Karmada's ``cmd/<command>`` programs (``karmada-<command>``) of ``version``.

    ``files`` (paths in Karmada's module) are copied beside them by their base name.
    """
    go = go_tool()
    with tempfile.TemporaryDirectory(prefix="clusterhealth-karmadabuild-") as tmp:
        work = pathlib.Path(tmp)
        info = _download_module(go, KARMADA_MODULE, version, work)
        upstream = pathlib.Path(str(info["GoMod"])).read_text()
        origin = info.get("Origin")
        commit = str(origin.get("Hash", "")) if isinstance(origin, dict) else ""
        (work / "go.mod").write_text(karmada_gomod(version, upstream))
        imports = "".join(f'\t_ "{KARMADA_MODULE}/cmd/{command}"\n' for command in commands)
        (work / "tools.go").write_text(
            f"//go:build tools\n\npackage tools\n\nimport (\n{imports})\n")
        _run([go, "mod", "tidy"], work, f"{KARMADA_MODULE} {version} go.mod", _MOD_FLAGS)
        _run([go, "mod", "verify"], work, f"{KARMADA_MODULE} {version} modules", _BUILD_FLAGS)
        partial = out_dir.with_name(out_dir.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        ldflags = _karmada_ldflags(version, commit)
        for output, package in ((f"karmada-{c}", f"{KARMADA_MODULE}/cmd/{c}") for c in commands):
            _run(
                [go, "build", "-trimpath", f"-ldflags=-s -w {ldflags}",
                 "-o", str(partial / output), package],
                work, f"{output} {version}", _BUILD_FLAGS,
            )
        if crds:
            _copy_karmada_crds(pathlib.Path(str(info["Dir"])), partial / "crds")
        for relative in files:
            source = pathlib.Path(str(info["Dir"])) / relative
            if not source.is_file():
                raise ProvisionError(f"{KARMADA_MODULE} {version} has no {relative}")
            shutil.copyfile(source, partial / source.name)
            (partial / source.name).chmod(0o644)
        shutil.rmtree(out_dir, ignore_errors=True)
        partial.rename(out_dir)


def karmada_binaries(version: str = KARMADA_VERSION) -> KarmadaBinaries:
    """Where the Karmada build of ``version`` lives in the cache (built or not)."""
    out_dir = cache_root() / "bin" / f"karmada-{version}"
    return KarmadaBinaries(out_dir / "karmada-aggregated-apiserver",
                           out_dir / "karmada-controller-manager", out_dir / "crds")


def ensure_karmada(version: str = KARMADA_VERSION) -> KarmadaBinaries:
    """Return cached Karmada binaries and CRDs, building them on first use."""
    binaries = karmada_binaries(version)
    if binaries.complete():
        return binaries
    out_dir = binaries.aggregated_apiserver.parent
    with _build_lock(out_dir.name):
        if not binaries.complete():
            out_dir.parent.mkdir(parents=True, exist_ok=True)
            _build_karmada(version, out_dir)
    return binaries


def ensure_karmada_scheduler(version: str = KARMADA_VERSION) -> pathlib.Path:
    """Return Karmada's own scheduler (``cmd/scheduler``, unmodified), built once.

    Built from the Go module proxy like Karmada's other parts; the scheduler
    benchmark runs it beside ours.
    """
    out_dir = cache_root() / "bin" / f"karmada-{version}-scheduler"
    binary = out_dir / "karmada-scheduler"
    if binary.exists():
        return binary
    with _build_lock(out_dir.name):
        if not binary.exists():
            out_dir.parent.mkdir(parents=True, exist_ok=True)
            _build_karmada(version, out_dir, ("scheduler",), crds=False)
    return binary


@dataclasses.dataclass(frozen=True)
class KarmadaWebhook:
    """``karmada-webhook`` and the webhook configuration Karmada installs with it."""

    binary: pathlib.Path
    configuration: pathlib.Path

    def complete(self) -> bool:
        """Whether both files are in place (a finished build)."""
        return self.binary.exists() and self.configuration.exists()


def ensure_karmada_webhook(version: str = KARMADA_VERSION) -> KarmadaWebhook:
    """Return Karmada's admission webhook (``cmd/webhook``, unmodified), built once.

    Its webhook configuration (``artifacts/deploy/webhook-configuration.yaml``
    of the same module) is kept beside it: the local environment's Karmada
    mode registers it as Karmada's installers do.
    """
    out_dir = cache_root() / "bin" / f"karmada-{version}-webhook"
    webhook = KarmadaWebhook(out_dir / "karmada-webhook",
                             out_dir / pathlib.PurePath(KARMADA_WEBHOOK_CONFIGURATION).name)
    if webhook.complete():
        return webhook
    with _build_lock(out_dir.name):
        if not webhook.complete():
            out_dir.parent.mkdir(parents=True, exist_ok=True)
            _build_karmada(version, out_dir, ("webhook",), crds=False,
                           files=(KARMADA_WEBHOOK_CONFIGURATION,))
    return webhook


def main() -> int:
    """Provision every binary and print where it is."""
    try:
        binaries = ensure_kubernetes()
        helm = ensure_helm()
        karmada = ensure_karmada()
        karmada_scheduler = ensure_karmada_scheduler()
        karmada_webhook = ensure_karmada_webhook()
        workloads = ensure_workload_parts()
        kubectl = ensure_kubectl()
        nodes = ensure_node_parts()
        registry = ensure_registry()
    except ProvisionError as exc:
        print(f"clusterhealth: {exc}", file=sys.stderr)
        return 1
    print(f"kube-apiserver: {binaries.kube_apiserver}")
    print(f"etcd:           {binaries.etcd}")
    print(f"helm:           {helm}")
    print(f"karmada:        {karmada.aggregated_apiserver}")
    print(f"                {karmada.controller_manager}")
    print(f"karmada CRDs:   {karmada.crd_dir}")
    print(f"                {karmada_scheduler}")
    print(f"                {karmada_webhook.binary}")
    print(f"kube-controller-manager: {workloads.kube_controller_manager}")
    print(f"kube-scheduler: {workloads.kube_scheduler}")
    print(f"kwok:           {workloads.kwok}")
    print(f"kubectl:        {kubectl}")
    print(f"kubelet:        {nodes.kubelet}")
    print(f"kube-proxy:     {nodes.kube_proxy}")
    print(f"coredns:        {nodes.coredns}")
    print(f"pause:          {nodes.pause}")
    print(f"registry (OCI): {registry}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
