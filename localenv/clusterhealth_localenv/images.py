"""Build the project's container images without a Docker daemon, from the same Dockerfiles.

The development machines and CI have no Docker engine, yet the node clusters
load the images and the charts' users build them.  So there is ONE recipe, the
``Dockerfile`` (and ``image/haproxy.Dockerfile``), and two ways to run it:
``docker build``/``buildah bud`` where a builder exists, and this module, which
reads the same file and executes its instructions itself:

* ``FROM debian:bookworm-slim`` (the ``BASE`` argument's default) becomes a root
  file system made from Debian's archive with ``debootstrap --variant=minbase
  bookworm`` (cached; the Dockerfile's first step slims it as it slims the
  official base);
* ``RUN`` runs ``/bin/sh -c`` in a ``chroot`` inside fresh mount and PID
  namespaces (``unshare``): its ``/proc``, its read-only ``--mount=type=bind``
  sources and the host's ``resolv.conf`` vanish with the namespace, also when a
  step fails, so nothing is left mounted;
* ``COPY`` copies from the build context (honouring ``.dockerignore``) or, with
  ``--from``, from an earlier stage; ``ENV``, ``ARG``, ``WORKDIR``, ``USER``,
  ``LABEL``, ``ENTRYPOINT`` and ``CMD`` are kept for the later steps and the
  image's configuration.  Any other instruction or flag is refused.

The final stage's root becomes one layer, written as an archive that both
``docker load`` and ``ctr images import`` read (an OCI image layout with
Docker's ``manifest.json`` beside it, as ``docker save`` writes since Docker
25).  Images are cached under ``~/.cache/clusterhealth/images`` keyed by every
input (the Dockerfile, the files its ``COPY`` and bind mounts name, the
builder's version), and each ``RUN`` leaves a snapshot keyed by the chain of
steps before it, so an edit to the sources re-runs only the steps after it.

It needs root (chroot, mounts, debootstrap) and the Debian packages
``debootstrap`` and ``util-linux``; a missing tool is one clear
:class:`ImageError`.  Run ``python -m clusterhealth_localenv.images`` (``make
image``) to build both images and print where the archives are.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fnmatch
import hashlib
import io
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Mapping, Sequence

from clusterhealth_localenv import binaries

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILDER_VERSION = "1"
"""Part of every cache key: bump it when this module builds differently."""
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
BASES = {"debian:bookworm-slim": DEBIAN_SUITE}
"""The bases this builder can make: the image name the Dockerfile uses -> Debian suite."""
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
VERSION = "0.1.0"


@dataclasses.dataclass(frozen=True)
class ImageSpec:
    """One image this repository builds: its Dockerfile and the name it is tagged with."""

    name: str
    dockerfile: pathlib.Path

    def reference(self, tag: str = VERSION) -> str:
        """``name:tag``, what the charts' ``image.repository``/``image.tag`` default to."""
        return f"{self.name}:{tag}"


IMAGES = (
    ImageSpec("clusterhealth", REPO / "Dockerfile"),
    ImageSpec("clusterhealth-haproxy", REPO / "image" / "haproxy.Dockerfile"),
)


class ImageError(RuntimeError):
    """An image could not be built; the message says which step and why."""


# ---------------------------------------------------------------- the Dockerfile


@dataclasses.dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction: its keyword, its ``--flags`` and the rest of the line."""

    keyword: str
    flags: tuple[tuple[str, str], ...]
    args: str
    line: int

    def flag(self, name: str) -> str | None:
        """The value of ``--name=value``, if given."""
        return next((value for key, value in self.flags if key == name), None)


SUPPORTED = {
    "ARG": (), "FROM": (), "RUN": ("mount",), "COPY": ("from",), "ENV": (), "WORKDIR": (),
    "USER": (), "LABEL": (), "ENTRYPOINT": (), "CMD": (),
}
"""Every instruction the daemon-less build executes, with the flags it honours."""

_FLAG = re.compile(r"--([a-z-]+)=(\S+)\s+")
_VAR = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


def parse(text: str) -> list[Instruction]:
    """Split a Dockerfile into instructions (continuations joined, comments dropped).

    Raises :class:`ImageError` for an instruction or flag :data:`SUPPORTED` lacks,
    so the daemon-less build never silently skips part of the recipe.
    """
    instructions: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1].strip())
            continue
        pending.append(stripped)
        logical = " ".join(part for part in pending if part)
        pending = []
        keyword, _, rest = logical.partition(" ")
        keyword = keyword.upper()
        if keyword not in SUPPORTED:
            raise ImageError(f"line {start}: {keyword} is not an instruction this build executes")
        flags: list[tuple[str, str]] = []
        rest = rest.strip() + " "
        while (match := _FLAG.match(rest)) is not None:
            if match.group(1) not in SUPPORTED[keyword]:
                raise ImageError(f"line {start}: {keyword} --{match.group(1)} is not supported")
            flags.append((match.group(1), match.group(2)))
            rest = rest[match.end():]
        instructions.append(Instruction(keyword, tuple(flags), rest.strip(), start))
    if pending:
        raise ImageError("the Dockerfile ends inside a continued line")
    return instructions


def substitute(value: str, scope: Mapping[str, str]) -> str:
    """Expand ``$NAME`` and ``${NAME}`` from ``scope`` (unknown names become empty)."""
    return _VAR.sub(lambda m: scope.get(m.group(1) or m.group(2), ""), value)


def _pairs(args: str, line: int) -> list[tuple[str, str]]:
    """``KEY=VALUE ...`` (shell-quoted) as pairs; the legacy ``ENV KEY VALUE`` is refused."""
    pairs = []
    for word in shlex.split(args):
        key, sep, value = word.partition("=")
        if not sep:
            raise ImageError(f"line {line}: write {word}=VALUE (the KEY VALUE form is refused)")
        pairs.append((key, value))
    return pairs


def _exec_form(args: str, line: int) -> list[str]:
    try:
        value = json.loads(args)
    except ValueError as exc:
        raise ImageError(f"line {line}: ENTRYPOINT/CMD must be a JSON list: {exc}") from exc
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ImageError(f"line {line}: ENTRYPOINT/CMD must be a JSON list of strings")
    return list(value)


@dataclasses.dataclass(frozen=True)
class BindMount:
    """``RUN --mount=type=bind,source=S,target=T``: the context's S read-only at T."""

    source: str
    target: str


def bind_mount(spec: str, line: int) -> BindMount:
    """Parse a ``--mount`` value; only read-only binds of the build context are supported."""
    fields = dict(part.partition("=")[::2] for part in spec.split(","))
    if fields.get("type") != "bind" or "target" not in fields or set(fields) - {
            "type", "source", "target", "ro", "readonly"}:
        raise ImageError(f"line {line}: only --mount=type=bind,source=...,target=... is supported")
    return BindMount(fields.get("source", "."), fields["target"])


# ---------------------------------------------------------------- the build context


def dockerignore(context: pathlib.Path) -> list[str]:
    """The ``.dockerignore`` patterns (exceptions with ``!`` are refused)."""
    path = context / ".dockerignore"
    if not path.exists():
        return []
    patterns = [line.strip().rstrip("/") for line in path.read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    if any(p.startswith("!") for p in patterns):
        raise ImageError(".dockerignore: exceptions (!pattern) are not supported")
    return patterns


def ignored(relative: str, patterns: Sequence[str]) -> bool:
    """Whether a context path matches one of the patterns (``**/x``, ``a/b``, ``*.y``)."""
    parts = relative.split("/")
    for pattern in patterns:
        if pattern.startswith("**/"):
            if any(fnmatch.fnmatchcase(part, pattern[3:]) for part in parts):
                return True
        elif any(fnmatch.fnmatchcase("/".join(parts[:n]), pattern)
                 for n in range(1, len(parts) + 1)):
            return True
    return False


def context_files(context: pathlib.Path, source: str,
                  patterns: Sequence[str]) -> list[pathlib.Path]:
    """Every file under ``source`` (a file or a folder of the context) the build sees."""
    root = (context / source).resolve()
    if not root.is_relative_to(context.resolve()):
        raise ImageError(f"{source} is outside the build context")
    if not root.exists():
        raise ImageError(f"{source} is not in the build context {context}")
    candidates = [root] if not root.is_dir() else sorted(root.rglob("*"))
    return [path for path in candidates if not path.is_dir()
            and not ignored(str(path.relative_to(context.resolve())), patterns)]


def _hash_files(digest: hashlib._Hash, context: pathlib.Path, files: Sequence[pathlib.Path],
                ) -> None:
    for path in files:
        relative = str(path.relative_to(context.resolve()))
        mode = "l" if path.is_symlink() else ("x" if os.access(path, os.X_OK) else "f")
        content = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
        digest.update(f"{relative}\0{mode}\0{len(content)}\0".encode() + content)


# ---------------------------------------------------------------- running steps


def require_tools() -> None:
    """Root and the commands the build runs, or one :class:`ImageError` naming what to do."""
    if os.geteuid() != 0:
        raise ImageError("the daemon-less image build needs root (chroot, mounts, debootstrap); "
                         "use `make image` with Docker or buildah otherwise")
    missing = [tool for tool in ("debootstrap", "unshare", "chroot", "tar")
               if shutil.which(tool) is None]
    if missing:
        raise ImageError(f"missing {', '.join(missing)}: run ./scripts/bootstrap.sh "
                         "(Debian packages debootstrap and util-linux)")


def run_in_root(root: pathlib.Path, command: Sequence[str], *, env: Mapping[str, str],
                user: str = "", workdir: str = "/", mounts: Sequence[tuple[pathlib.Path, str]] = (),
                network: bool = True, timeout: float = 1800,
                ) -> subprocess.CompletedProcess[str]:
    """Run ``command`` chrooted in ``root`` in new mount and PID namespaces.

    ``mounts`` are ``(host path, path in root)`` pairs bound read-only; with
    ``network`` the host's ``resolv.conf`` is bound too.  Everything mounted
    goes away with the namespace.  ``user`` is ``uid[:gid]`` (root if empty).
    """
    script = ["set -e", f"mount -t proc proc {shlex.quote(str(root / 'proc'))}"]
    created: list[pathlib.Path] = []
    binds = list(mounts)
    if network and pathlib.Path("/etc/resolv.conf").exists():
        binds.append((pathlib.Path("/etc/resolv.conf").resolve(), "/etc/resolv.conf"))
    for source, target in binds:
        inside = root / target.lstrip("/")
        if not inside.exists() and not inside.is_symlink():
            missing = [inside, *(p for p in inside.parents
                                 if p.is_relative_to(root) and not p.exists())]
            created += reversed(missing)  # outermost first: removed last
            inside.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                inside.mkdir()
            else:
                inside.touch()
        quoted = shlex.quote(str(inside))
        script += [f"mount --bind {shlex.quote(str(source))} {quoted}",
                   f"mount -o remount,bind,ro {quoted}"]
    chroot = ["chroot"] + ([f"--userspec={user}"] if user else []) + [str(root)]
    inner = ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in env.items()),
             "/bin/sh", "-c", 'cd "$0" && exec "$@"', workdir, *command]
    script.append("exec " + shlex.join(chroot + inner))
    try:
        return subprocess.run(
            ["unshare", "--mount", "--pid", "--fork", "--kill-child", "--propagation", "private",
             "/bin/sh", "-c", "\n".join(script)],
            capture_output=True, text=True, timeout=timeout, check=False)
    finally:
        for inside in reversed(created):  # what it made for the mounts, innermost first
            with contextlib.suppress(OSError):
                if inside.is_dir():
                    inside.rmdir()
                else:
                    inside.unlink()


def make_base(suite: str, cache: pathlib.Path) -> pathlib.Path:
    """The ``debootstrap --variant=minbase`` root of ``suite``, made once and cached."""
    base = cache / "bases" / f"{suite}-minbase"
    if (base / ".complete").exists():
        return base
    with binaries._build_lock(f"image-base-{suite}"):
        if (base / ".complete").exists():
            return base
        partial = base.with_name(base.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.parent.mkdir(parents=True, exist_ok=True)
        print(f"clusterhealth: debootstrap {suite} (first build only; cached afterwards)",
              file=sys.stderr)
        proc = subprocess.run(
            ["debootstrap", "--variant=minbase", "--merged-usr", suite, str(partial),
             DEBIAN_MIRROR], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise ImageError(f"debootstrap {suite} failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
        # What a container runtime provides and a base image therefore leaves empty.
        for leftover in ("var/cache/apt/archives", "var/log/bootstrap.log"):
            path = partial / leftover
            if path.is_dir():
                for item in path.glob("*.deb"):
                    item.unlink()
            elif path.exists():
                path.unlink()
        for name in ("etc/resolv.conf", "etc/hostname"):
            (partial / name).write_text("")
        (partial / ".complete").touch()
        partial.rename(base)
    return base


def _copy_tree(source: pathlib.Path, target: pathlib.Path) -> None:
    """``cp -a``: ownership, modes, links and times kept (the root file systems)."""
    proc = subprocess.run(["cp", "-a", "--reflink=auto", f"{source}/.", str(target)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ImageError(f"copying {source} failed: {proc.stderr.strip()}")


# ---------------------------------------------------------------- executing a Dockerfile


@dataclasses.dataclass
class Stage:
    """A stage being built: its root and what later steps and the image config see."""

    name: str
    root: pathlib.Path
    key: str
    env: dict[str, str]
    args: dict[str, str]
    workdir: str = "/"
    user: str = ""
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    pending: pathlib.Path | None = None
    """A cached RUN's snapshot that stands for ``root`` until a step needs to write to it."""

    @property
    def files(self) -> pathlib.Path:
        """Where the stage's files are now, for reading."""
        return self.pending or self.root

    def materialize(self) -> pathlib.Path:
        """``root``, holding the stage's files, for a step that writes."""
        if self.pending is not None:
            shutil.rmtree(self.root)
            self.root.mkdir()
            _copy_tree(self.pending, self.root)
            (self.root / ".complete").unlink()
            self.pending = None
        return self.root


@dataclasses.dataclass(frozen=True)
class Built:
    """A built image: its archive and what is known about it."""

    archive: pathlib.Path
    reference: str
    manifest_digest: str
    """``sha256:...`` of the OCI manifest (what ``ctr`` shows after an import)."""
    config: dict[str, object]
    size: int
    """Bytes of the uncompressed layer (what ``docker images`` calls the size)."""
    seconds: float
    cached: bool


class Builder:
    """Executes one Dockerfile against a build context; see the module docstring."""

    def __init__(self, spec: ImageSpec, *, context: pathlib.Path = REPO,
                 cache: pathlib.Path | None = None, build_args: Mapping[str, str] | None = None,
                 tag: str = VERSION, log: bool = True) -> None:
        self.spec = spec
        self.context = context
        self.cache = cache if cache is not None else binaries.cache_root() / "images"
        self.build_args = dict(build_args or {})
        self.tag = tag
        self.instructions = parse(spec.dockerfile.read_text())
        self.patterns = dockerignore(context)
        self.log = log

    def inputs_key(self) -> str:
        """The hash of everything the image is made of: the cache key of the archive."""
        digest = hashlib.sha256(f"builder {BUILDER_VERSION}\0".encode())
        digest.update(self.spec.dockerfile.read_bytes())
        digest.update(json.dumps([self.build_args, self.tag], sort_keys=True).encode())
        sources: set[pathlib.Path] = set()
        for instruction in self.instructions:
            for source in self._context_sources(instruction):
                sources.update(context_files(self.context, source, self.patterns))
        _hash_files(digest, self.context, sorted(sources))
        return digest.hexdigest()

    def _context_sources(self, instruction: Instruction) -> list[str]:
        if instruction.keyword == "COPY" and instruction.flag("from") is None:
            return shlex.split(instruction.args)[:-1]
        if instruction.keyword == "RUN" and instruction.flag("mount") is not None:
            return [bind_mount(str(instruction.flag("mount")), instruction.line).source]
        return []

    def build(self) -> Built:
        """Return the cached archive for the current inputs, building it if needed."""
        key = self.inputs_key()
        out_dir = self.cache / f"{self.spec.name}-{key[:16]}"
        archive = out_dir / f"{self.spec.name}.tar"
        meta = out_dir / "image.json"
        if meta.exists() and archive.exists():
            return self._built(archive, meta, cached=True)
        require_tools()
        with binaries._build_lock(f"image-{self.spec.name}"):
            if not (meta.exists() and archive.exists()):
                started = time.monotonic()
                with tempfile.TemporaryDirectory(prefix="clusterhealth-image-",
                                                 dir=self.cache.parent) as tmp:
                    stage = self._execute(pathlib.Path(tmp))
                    partial = out_dir.with_name(out_dir.name + ".partial")
                    shutil.rmtree(partial, ignore_errors=True)
                    partial.mkdir(parents=True)
                    info = write_archive(stage, partial / archive.name,
                                         self.spec.reference(self.tag),
                                         pathlib.Path(tmp))
                    info["seconds"] = round(time.monotonic() - started, 1)
                    (partial / meta.name).write_text(json.dumps(info, indent=2) + "\n")
                    shutil.rmtree(out_dir, ignore_errors=True)
                    partial.rename(out_dir)
                for old in self._own(self.cache):
                    if old != out_dir:  # one archive per image is kept
                        shutil.rmtree(old, ignore_errors=True)
                return self._built(archive, meta, cached=False)
        return self._built(archive, meta, cached=True)

    def _own(self, folder: pathlib.Path) -> list[pathlib.Path]:
        """This image's cache entries in ``folder`` (``<name>-<hex key>``, not another's)."""
        return [path for path in folder.glob(f"{self.spec.name}-*") if path.is_dir()
                and re.fullmatch(r"[0-9a-f]+(\.partial)?", path.name[len(self.spec.name) + 1:])]

    def _built(self, archive: pathlib.Path, meta: pathlib.Path, *, cached: bool) -> Built:
        info = json.loads(meta.read_text())
        return Built(archive, str(info["reference"]), str(info["manifest_digest"]),
                     dict(info["config"]), int(info["size"]), float(info["seconds"]), cached)

    def _say(self, message: str) -> None:
        if self.log:
            print(f"clusterhealth image {self.spec.name}: {message}", file=sys.stderr)

    def _execute(self, scratch: pathlib.Path) -> Stage:
        global_args: dict[str, str] = {}
        stages: list[Stage] = []
        stage: Stage | None = None
        used: set[pathlib.Path] = set()
        for instruction in self.instructions:
            if stage is None and instruction.keyword not in ("ARG", "FROM"):
                raise ImageError(f"line {instruction.line}: {instruction.keyword} before FROM")
            if instruction.keyword == "FROM":
                stage = self._from(instruction, global_args, stages, scratch)
                stages.append(stage)
            elif instruction.keyword == "ARG":
                name, _, default = instruction.args.partition("=")
                value = self.build_args.get(name, default)
                if stage is None:
                    global_args[name] = value
                else:
                    stage.args[name] = value
                    stage.key = hashlib.sha256(f"{stage.key}\0ARG {name}={value}".encode()
                                               ).hexdigest()
            else:
                assert stage is not None
                stage.key = hashlib.sha256(
                    f"{stage.key}\0{instruction.keyword}\0{instruction.flags}\0"
                    f"{instruction.args}\0{self._step_inputs(instruction, stages)}".encode()
                ).hexdigest()
                self._step(stage, instruction, stages, used)
        if stage is None:
            raise ImageError(f"{self.spec.dockerfile} has no FROM")
        snapshots = self.cache / "steps"
        if snapshots.exists():  # keep what this build used: the next build starts from it
            for old in self._own(snapshots):
                if old not in used:
                    shutil.rmtree(old, ignore_errors=True)
        return stage

    def _step_inputs(self, instruction: Instruction, stages: Sequence[Stage]) -> str:
        digest = hashlib.sha256()
        _hash_files(digest, self.context, [
            path for source in self._context_sources(instruction)
            for path in context_files(self.context, source, self.patterns)])
        origin = instruction.flag("from")
        if origin is not None:
            digest.update(self._stage(origin, stages, instruction.line).key.encode())
        return digest.hexdigest()

    def _from(self, instruction: Instruction, global_args: Mapping[str, str],
              stages: Sequence[Stage], scratch: pathlib.Path) -> Stage:
        words = substitute(instruction.args, global_args).split()
        if len(words) not in (1, 3) or (len(words) == 3 and words[1].upper() != "AS"):
            raise ImageError(f"line {instruction.line}: FROM IMAGE [AS NAME]")
        name = words[2] if len(words) == 3 else str(len(stages))
        root = scratch / f"stage-{len(stages)}"
        root.mkdir()
        previous = next((s for s in stages if s.name == words[0]), None)
        if previous is not None:
            _copy_tree(previous.files, root)
            (root / ".complete").unlink(missing_ok=True)
            return dataclasses.replace(previous, name=name, root=root, env=dict(previous.env),
                                       args={}, labels=dict(previous.labels), pending=None)
        suite = BASES.get(words[0])
        if suite is None:
            raise ImageError(f"line {instruction.line}: the daemon-less build makes only the "
                             f"bases {sorted(BASES)} (FROM {words[0]})")
        self._say(f"FROM {words[0]} (debootstrap --variant=minbase {suite})")
        _copy_tree(make_base(suite, self.cache), root)
        (root / ".complete").unlink()
        key = hashlib.sha256(f"base {suite} {BUILDER_VERSION}".encode()).hexdigest()
        return Stage(name, root, key, {"PATH": DEFAULT_PATH}, {})

    def _stage(self, name: str, stages: Sequence[Stage], line: int) -> Stage:
        found = next((s for s in stages if s.name == name), None)
        if found is None:
            raise ImageError(f"line {line}: no earlier stage named {name}")
        return found

    def _step(self, stage: Stage, instruction: Instruction, stages: Sequence[Stage],
              used: set[pathlib.Path]) -> None:
        scope = {**stage.args, **stage.env}
        keyword, args = instruction.keyword, instruction.args
        if keyword == "ENV":
            stage.env.update((k, substitute(v, scope)) for k, v in _pairs(args, instruction.line))
        elif keyword == "LABEL":
            stage.labels.update((k, substitute(v, scope))
                                for k, v in _pairs(args, instruction.line))
        elif keyword == "WORKDIR":
            stage.workdir = os.path.normpath(os.path.join(stage.workdir, substitute(args, scope)))
            if not (stage.files / stage.workdir.lstrip("/")).is_dir():
                (stage.materialize() / stage.workdir.lstrip("/")).mkdir(parents=True)
        elif keyword == "USER":
            stage.user = substitute(args, scope)
        elif keyword == "ENTRYPOINT":
            stage.entrypoint = _exec_form(args, instruction.line)
        elif keyword == "CMD":
            stage.cmd = _exec_form(args, instruction.line)
        elif keyword == "COPY":
            self._copy(stage, instruction, stages, scope)
        else:
            self._run(stage, instruction, used)

    def _copy(self, stage: Stage, instruction: Instruction, stages: Sequence[Stage],
              scope: Mapping[str, str]) -> None:
        words = [substitute(w, scope) for w in shlex.split(instruction.args)]
        if len(words) < 2:
            raise ImageError(f"line {instruction.line}: COPY SOURCE... DEST")
        *sources, dest = words
        stage.materialize()
        target = pathlib.PurePosixPath(stage.workdir) / dest
        into_dir = dest.endswith("/") or len(sources) > 1
        origin = instruction.flag("from")
        for source in sources:
            if origin is not None:  # a stage's files keep their owners, modes and links
                path = self._stage(origin, stages, instruction.line).files / source.lstrip("/")
                if not path.exists():
                    raise ImageError(f"line {instruction.line}: {source} is not in {origin}")
                out = target if path.is_dir() or not into_dir else target / path.name
                host = stage.root / str(out).lstrip("/")
                host.parent.mkdir(parents=True, exist_ok=True)
                if path.is_dir():
                    host.mkdir(exist_ok=True)
                    _copy_tree(path, host)
                else:
                    shutil.copy2(path, host, follow_symlinks=False)
                continue
            path = (self.context / source).resolve()
            for file in context_files(self.context, source, self.patterns):
                out = (target / file.relative_to(path) if path.is_dir()
                       else target / file.name if into_dir else target)
                host = stage.root / str(out).lstrip("/")
                host.parent.mkdir(parents=True, exist_ok=True)
                if host.exists() or host.is_symlink():
                    host.unlink()
                shutil.copy2(file, host, follow_symlinks=False)
                os.chown(host, 0, 0, follow_symlinks=False)  # Docker's COPY: owned by root

    def _run(self, stage: Stage, instruction: Instruction, used: set[pathlib.Path]) -> None:
        snapshot = self.cache / "steps" / f"{self.spec.name}-{stage.key[:24]}"
        used.add(snapshot)
        if (snapshot / ".complete").exists():
            self._say(f"line {instruction.line}: RUN (cached)")
            stage.pending = snapshot  # copied only if a later step writes
            return
        stage.materialize()
        passed, mounts = host_network_settings(os.environ)
        spec = instruction.flag("mount")
        if spec is not None:
            bind = bind_mount(spec, instruction.line)
            mounts.append(((self.context / bind.source).resolve(), bind.target))
        self._say(f"line {instruction.line}: RUN {instruction.args[:70]}")
        started = time.monotonic()
        proc = run_in_root(stage.root, ["/bin/sh", "-c", instruction.args], env={
            "HOME": "/root", **passed, **stage.args, **stage.env}, user=stage.user,
            workdir=stage.workdir, mounts=mounts)
        if proc.returncode != 0:
            raise ImageError(f"{self.spec.dockerfile.name} line {instruction.line} failed "
                             f"(exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-4000:]}")
        self._say(f"line {instruction.line}: done in {time.monotonic() - started:.0f} s")
        partial = snapshot.with_name(snapshot.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        _copy_tree(stage.root, partial)
        (partial / ".complete").touch()
        partial.rename(snapshot)


# ---------------------------------------------------------------- the archive

PASSED_ENVIRONMENT = ("PIP_CERT", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST",
                      "PIP_DEFAULT_TIMEOUT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE",
                      "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy",
                      "no_proxy")
"""How the host reaches the package indexes, given to every RUN (never to the image):
Docker's predefined proxy arguments, and pip's index and CA settings (a machine behind a
TLS-inspecting proxy trusts its CA through PIP_CERT). The lock files' hashes still decide
what is installed."""
_CERTIFICATE_VARIABLES = ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")
HOST_CA_DIR = "/run/clusterhealth-host-ca"
"""Where a RUN step sees the host's CA files (``/run`` is left out of every layer)."""


def host_network_settings(environ: Mapping[str, str]) -> tuple[
        dict[str, str], list[tuple[pathlib.Path, str]]]:
    """The :data:`PASSED_ENVIRONMENT` variables the host sets, and the CA files they name.

    The files are bound read-only under :data:`HOST_CA_DIR` in the root, and the variables
    name them there.  Not at their own paths: a host whose ``SSL_CERT_FILE`` is
    ``/etc/ssl/certs/ca-certificates.crt`` would bind it over the file the image's
    ``ca-certificates`` package writes, and the package's set-up fails ("Device or
    resource busy").
    """
    env = {name: environ[name] for name in PASSED_ENVIRONMENT if environ.get(name)}
    mounts: list[tuple[pathlib.Path, str]] = []
    inside: dict[pathlib.Path, str] = {}
    for name in _CERTIFICATE_VARIABLES:
        path = pathlib.Path(env.get(name, ""))
        if env.get(name) and path.is_absolute() and path.is_file():
            source = path.resolve()
            if source not in inside:
                inside[source] = f"{HOST_CA_DIR}/{len(inside)}-{source.name}"
                mounts.append((source, inside[source]))
            env[name] = inside[source]
        else:
            env.pop(name, None)
    return env, mounts


LAYER_EXCLUDES = ("./dev/*", "./proc/*", "./sys/*", "./tmp/*", "./run/*", "./.complete")
"""What a container runtime provides: empty in an image."""


def _sha256_file(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def image_config(stage: Stage, diff_id: str) -> dict[str, object]:
    """The OCI/Docker image configuration of a built stage."""
    config: dict[str, object] = {
        "Env": [f"{k}={v}" for k, v in stage.env.items()],
        "WorkingDir": stage.workdir,
        "Labels": dict(stage.labels),
    }
    if stage.user:
        config["User"] = stage.user
    if stage.entrypoint is not None:
        config["Entrypoint"] = stage.entrypoint or None
    if stage.cmd is not None:
        config["Cmd"] = stage.cmd
    return {
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
        "history": [{"created": "1970-01-01T00:00:00Z",
                     "created_by": "clusterhealth_localenv.images (daemon-less build)"}],
    }


def write_archive(stage: Stage, archive: pathlib.Path, reference: str,
                  scratch: pathlib.Path) -> dict[str, object]:
    """Write ``stage`` as one layer into an archive ``docker load`` and ``ctr`` both read."""
    layer = scratch / "layer.tar"
    proc = subprocess.run(
        ["tar", "--create", "--file", str(layer), "--directory", str(stage.files),
         "--sort=name", "--numeric-owner", "--xattrs", "--xattrs-include=security.capability",
         *(f"--exclude={pattern}" for pattern in LAYER_EXCLUDES), "."],
        capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ImageError(f"writing the layer failed: {proc.stderr.strip()}")
    diff_id = _sha256_file(layer)
    config = image_config(stage, diff_id)
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    config_digest = hashlib.sha256(config_bytes).hexdigest()
    layer_size = layer.stat().st_size
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": f"sha256:{config_digest}", "size": len(config_bytes)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": f"sha256:{diff_id}", "size": layer_size}],
    }
    manifest_bytes = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    manifest_digest = hashlib.sha256(manifest_bytes).hexdigest()
    repository, _, tag = reference.rpartition(":")
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": f"sha256:{manifest_digest}", "size": len(manifest_bytes),
            "annotations": {"io.containerd.image.name": docker_name(reference),
                            "org.opencontainers.image.ref.name": tag},
        }],
    }
    docker_manifest = [{"Config": f"blobs/sha256/{config_digest}",
                        "RepoTags": [f"{repository}:{tag}"],
                        "Layers": [f"blobs/sha256/{diff_id}"]}]
    small = {
        "oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
        "index.json": json.dumps(index).encode(),
        "manifest.json": json.dumps(docker_manifest).encode(),
        f"blobs/sha256/{config_digest}": config_bytes,
        f"blobs/sha256/{manifest_digest}": manifest_bytes,
    }
    with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as out:
        for directory in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            out.addfile(info)
        for name, content in sorted(small.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(content), 0o644
            out.addfile(info, io.BytesIO(content))
        info = tarfile.TarInfo(f"blobs/sha256/{diff_id}")
        info.size, info.mode = layer_size, 0o644
        with layer.open("rb") as handle:
            out.addfile(info, handle)
    layer.unlink()
    return {"reference": reference, "manifest_digest": f"sha256:{manifest_digest}",
            "config": config, "size": layer_size}


def docker_name(reference: str) -> str:
    """The fully qualified name a kubelet asks containerd for (``docker.io/library/...``)."""
    first = reference.split("/", 1)[0]
    if "/" in reference and ("." in first or ":" in first or first == "localhost"):
        return reference
    return f"docker.io/{reference}" if "/" in reference else f"docker.io/library/{reference}"


# ---------------------------------------------------------------- the command line


def ensure_images(tag: str = VERSION) -> dict[str, Built]:
    """Build (or take from the cache) every image of :data:`IMAGES`, tagged ``tag``."""
    return {spec.name: Builder(spec, tag=tag).build() for spec in IMAGES}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m clusterhealth_localenv.images``: build the images, print their archives."""
    parser = argparse.ArgumentParser(prog="python -m clusterhealth_localenv.images",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--image", choices=[spec.name for spec in IMAGES], action="append",
                        help="build only this image (repeatable); default: all")
    parser.add_argument("--tag", default=VERSION, help=f"the images' tag (default {VERSION})")
    parser.add_argument("--json", action="store_true", help="print what was built as JSON")
    options = parser.parse_args(argv)
    specs = [spec for spec in IMAGES if not options.image or spec.name in options.image]
    results: dict[str, Built] = {}
    try:
        for spec in specs:
            results[spec.name] = Builder(spec, tag=options.tag).build()
    except ImageError as exc:
        print(f"clusterhealth: {exc}", file=sys.stderr)
        return 1
    if options.json:
        print(json.dumps({name: {"archive": str(b.archive), "reference": b.reference,
                                 "manifest_digest": b.manifest_digest, "size": b.size,
                                 "build_seconds": b.seconds, "cached": b.cached}
                          for name, b in results.items()}, indent=2))
    else:
        for built in results.values():
            state = "cached" if built.cached else f"built in {built.seconds:.0f} s"
            print(f"{built.reference}: {built.archive} ({built.size / 1e6:.0f} MB, "
                  f"{built.manifest_digest[:19]}..., {state})")
            print(f"  load it: docker load -i {built.archive}   "
                  f"or: ctr -n k8s.io images import {built.archive}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
