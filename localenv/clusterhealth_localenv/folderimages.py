"""Container images without a registry or a Docker daemon: a folder in, a docker-archive tar out.

Nodes that run containers (:mod:`.nodes`) need images, and the local
environment reaches no registry.  An image here is a root filesystem folder
made by this process (a static binary or two), written as the tar that
``docker save`` makes (``manifest.json``, the image config, one layer) and
loaded into a Node's containerd with ``ctr images import``; Pods name it with
``imagePullPolicy: Never`` or ``IfNotPresent``.

The tar is reproducible: entries are sorted and owned by root, with time 0,
so the same folder gives the same image ID.

:func:`static_binary_image` makes the images the environment itself needs
(pause, CoreDNS); :func:`busybox_image` a small test image with a shell and
the usual tools from Debian's ``busybox-static``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import pathlib
import shutil
import stat
import subprocess
import tarfile
import tempfile
from collections.abc import Sequence

PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BUSYBOX = pathlib.Path("/bin/busybox")
"""Debian's ``busybox-static`` (``scripts/bootstrap.sh`` installs it)."""


class ImageError(RuntimeError):
    """An image could not be written; the message says why."""


@dataclasses.dataclass(frozen=True)
class Image:
    """A docker-archive tar and what it holds."""

    reference: str
    """The name Pods use, ``<repository>:<tag>``."""
    archive: pathlib.Path
    image_id: str
    """``sha256:<hex>`` of the image config (what ``docker images`` calls IMAGE ID)."""


def _layer(root: pathlib.Path) -> bytes:
    """The folder as an uncompressed tar: sorted, owned by root, time 0."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        paths = sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix())
        for path in paths:
            info = tar.gettarinfo(str(path), arcname=path.relative_to(root).as_posix())
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = 0
            if info.isreg():
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
    return buffer.getvalue()


def write_docker_archive(
    root: pathlib.Path, output: pathlib.Path, reference: str, *,
    entrypoint: Sequence[str] = (), cmd: Sequence[str] = (), env: Sequence[str] = (),
    workdir: str = "/",
) -> Image:
    """Write ``root`` as a one-layer image named ``reference`` to the tar ``output``."""
    if ":" not in reference.rsplit("/", 1)[-1]:
        raise ImageError(f"image reference {reference!r} has no tag (want name:tag)")
    if not root.is_dir():
        raise ImageError(f"{root} is not a folder")
    layer = _layer(root)
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Env": list(env) or [PATH],
            "Entrypoint": list(entrypoint) or None,
            "Cmd": list(cmd) or None,
            "WorkingDir": workdir,
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": f"clusterhealth_localenv.images from {root.name}"}],
        "created": "1970-01-01T00:00:00Z",
    }
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    config_hex = hashlib.sha256(config_bytes).hexdigest()
    layer_name = f"{diff_id.removeprefix('sha256:')}/layer.tar"
    manifest = [{"Config": f"{config_hex}.json", "RepoTags": [reference],
                 "Layers": [layer_name]}]
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(output.name + ".partial")
    with tarfile.open(partial, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in ((f"{config_hex}.json", config_bytes), (layer_name, layer),
                           ("manifest.json", json.dumps(manifest).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    partial.replace(output)
    return Image(reference, output, f"sha256:{config_hex}")


def static_binary_image(binary: pathlib.Path, output: pathlib.Path, reference: str, *,
                        args: Sequence[str] = ()) -> Image:
    """An image holding one static program at ``/<name>``, its entrypoint."""
    if not binary.is_file():
        raise ImageError(f"{binary} is missing")
    with tempfile.TemporaryDirectory(prefix="clusterhealth-image-") as tmp:
        root = pathlib.Path(tmp) / "root"
        root.mkdir()
        shutil.copy2(binary, root / binary.name)
        (root / binary.name).chmod(0o755)
        return write_docker_archive(root, output, reference,
                                    entrypoint=[f"/{binary.name}", *args])


def _is_static(binary: pathlib.Path) -> bool:
    """Whether an ELF program has no interpreter (``PT_INTERP``): a static one."""
    with binary.open("rb") as handle:
        return b"/lib64/ld-linux" not in handle.read(4096)


def busybox_image(output: pathlib.Path, reference: str,
                  busybox: pathlib.Path = BUSYBOX) -> Image:
    """A test image: Debian's static busybox with every applet linked in ``/bin``.

    ``sh``, ``wget``, ``nslookup``, ``httpd``, ``nc``, ``sleep``…; ``/tmp`` is writable.
    """
    if not busybox.is_file() or not _is_static(busybox):
        raise ImageError(f"{busybox} is not a static busybox: install Debian package "
                         "busybox-static")
    listing = subprocess.run([str(busybox), "--list"], capture_output=True, text=True,
                             check=False)
    if listing.returncode != 0:
        raise ImageError(f"{busybox} --list failed: {listing.stderr.strip()}")
    with tempfile.TemporaryDirectory(prefix="clusterhealth-image-") as tmp:
        root = pathlib.Path(tmp) / "root"
        (root / "bin").mkdir(parents=True)
        shutil.copy2(busybox, root / "bin" / "busybox")
        for applet in sorted(set(listing.stdout.split())):
            if applet != "busybox" and "/" not in applet:
                os.symlink("busybox", root / "bin" / applet)
        for folder in ("tmp", "etc", "root"):
            (root / folder).mkdir()
        (root / "tmp").chmod(stat.S_IRWXU | stat.S_IRWXG | stat.S_IRWXO | stat.S_ISVTX)
        (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
        (root / "etc" / "group").write_text("root:x:0:\n")
        return write_docker_archive(root, output, reference, cmd=["sh"])
