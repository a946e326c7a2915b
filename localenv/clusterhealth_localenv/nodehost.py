"""What Nodes that run containers change on this machine beyond their namespaces, and its undoing.

A Node of :mod:`.nodes` lives in namespaces of its own, but two things of
the machine are shared and cannot be namespaced:

* kernel settings kubelet writes when it starts (``setupKernelTunables``:
  ``vm.overcommit_memory``, ``vm.panic_on_oom``, ``kernel.panic``,
  ``kernel.panic_on_oops``, ``kernel.keys.root_maxkeys`` / ``root_maxbytes``).
  :class:`KernelSettings` records their values before the first environment
  with Nodes starts and writes them back when the last one stops; the record
  (``/tmp/clusterhealth-nodes/sysctls.json``) lists its holders by pid, so an
  environment killed before it could restore is undone by the next one.  The
  per-user inotify limits are raised meanwhile (:data:`NODE_LIMITS`) and restored
  the same way;
* cgroups: kubelet and runc make folders under each kubelet's ``cgroupRoot`` in
  every hierarchy.  :class:`CgroupRoot` makes ``/clusterhealth-nodes-<tag>/<node>``
  beforehand (kubelet insists it exists; two kubelets under one root kill each
  other's Pods) and removes the whole tree afterwards.

Both need root.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pathlib
import signal
import time
from collections.abc import Iterator, Mapping, Sequence

from clusterhealth_localenv import processes

STATE_DIR = pathlib.Path("/tmp/clusterhealth-nodes")
KUBELET_SYSCTLS = (
    "vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
)
"""What kubelet v1.34 sets on this machine at start (its ``setupKernelTunables``)."""
NODE_LIMITS = {"fs.inotify.max_user_instances": 1024, "fs.inotify.max_user_watches": 524288}
"""Raised to at least these while Nodes run.  Every kubelet (cAdvisor, its configuration),
containerd (its CNI folder) and API server takes inotify instances of one user (root);
Debian's 128 ran out with five Nodes beside other test runs' API servers (kubelet then
stops: "Failed to start cAdvisor: inotify_init: too many open files").  kind documents
the same limits for its multi-node clusters."""
CGROUP_PREFIX = "clusterhealth-nodes-"


class HostStateError(RuntimeError):
    """This machine's state could not be changed or restored; the message says what."""


@contextlib.contextmanager
def machine_lock(name: str) -> Iterator[None]:
    """One holder at a time across processes of ``/tmp/clusterhealth-nodes/<name>.lock``."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    with (STATE_DIR / f"{name}.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def sysctl_path(name: str) -> pathlib.Path:
    """``/proc/sys/...`` of a dotted name."""
    return pathlib.Path("/proc/sys") / name.replace(".", "/")


def read_sysctls(names: Sequence[str]) -> dict[str, str]:
    """Current values (missing ones left out)."""
    values = {}
    for name in names:
        with contextlib.suppress(OSError):
            values[name] = sysctl_path(name).read_text().strip()
    return values


def write_sysctls(values: dict[str, str]) -> None:
    """Write each value back (:class:`HostStateError` naming those that failed)."""
    failed = []
    for name, value in values.items():
        try:
            sysctl_path(name).write_text(value)
        except OSError as exc:
            failed.append(f"{name}={value} ({exc})")
    if failed:
        raise HostStateError(f"could not write {', '.join(failed)}")


class KernelSettings:
    """Machine-wide settings saved before the first holder and restored after the last."""

    def __init__(self, names: Sequence[str] = KUBELET_SYSCTLS,
                 state: pathlib.Path | None = None,
                 minimums: Mapping[str, int] | None = None) -> None:
        self.minimums = dict(minimums or {})
        """Settings raised to at least this value while held (recorded and restored)."""
        self.names = tuple(dict.fromkeys([*names, *self.minimums]))
        self.state = state or STATE_DIR / "sysctls.json"

    def _load(self) -> tuple[list[int], dict[str, str] | None, bool]:
        """The live holders, the saved values, and whether dead holders were recorded."""
        try:
            loaded = json.loads(self.state.read_text())
        except (OSError, ValueError):
            return [], None, False
        if not isinstance(loaded, dict):
            return [], None, False
        recorded = [p for p in loaded.get("holders") or [] if isinstance(p, int)]
        values = loaded.get("values")
        saved = {str(k): str(v) for k, v in values.items()} if isinstance(values, dict) else None
        holders = [p for p in recorded if processes.alive(p)]
        return holders, saved, len(holders) < len(recorded)

    def hold(self, owner: int | None = None) -> None:
        """Add ``owner`` (this process) as a holder; record the values if it is the first."""
        owner = os.getpid() if owner is None else owner
        with machine_lock("sysctls"):
            holders, saved, dead = self._load()
            if not holders and saved is not None and dead:
                # every holder died without restoring: undo what they left first
                write_sysctls(saved)
                saved = None
            if not holders or saved is None:
                saved = read_sysctls(self.names)
            # a holder that records fewer names came first: record ours before raising them
            saved |= read_sysctls([n for n in self.names if n not in saved])
            holders.append(owner)
            self.state.parent.mkdir(parents=True, exist_ok=True)
            self.state.write_text(json.dumps({"holders": holders, "values": saved}))
            current = read_sysctls(list(self.minimums))
            write_sysctls({name: str(least) for name, least in self.minimums.items()
                           if name in current and int(current[name]) < least})

    def sweep(self) -> bool:
        """Write back what holders that all died left; whether there was such a record."""
        with machine_lock("sysctls"):
            holders, saved, dead = self._load()
            if holders or not dead:
                return False
            if saved is not None:
                write_sysctls(saved)
            self.state.unlink(missing_ok=True)
            return True

    def release(self, owner: int | None = None) -> None:
        """Remove one hold of ``owner``; the last holder writes the recorded values back."""
        owner = os.getpid() if owner is None else owner
        with machine_lock("sysctls"):
            holders, saved, _ = self._load()
            with contextlib.suppress(ValueError):
                holders.remove(owner)
            if holders:
                self.state.write_text(json.dumps({"holders": holders, "values": saved}))
                return
            if saved is not None:
                write_sysctls(saved)
            self.state.unlink(missing_ok=True)


def cgroup_hierarchies() -> list[pathlib.Path]:
    """Every mounted cgroup hierarchy (v1 controllers, ``name=systemd``, the unified one)."""
    found = []
    for line in pathlib.Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fstype = right.split()[0] if right else ""
        if fstype in ("cgroup", "cgroup2"):
            found.append(pathlib.Path(left.split()[4]))
    return found


class CgroupRoot:
    """``/clusterhealth-nodes-<tag>`` in every hierarchy, one kubelet ``cgroupRoot`` per Node."""

    def __init__(self, tag: str) -> None:
        self.name = f"{CGROUP_PREFIX}{tag}"

    def kubelet_root(self, node: str) -> str:
        """The ``cgroupRoot`` of one Node's kubelet."""
        return f"/{self.name}/{node}"

    def create(self, nodes: Sequence[str]) -> None:
        """Make the root and one folder per Node in every hierarchy (cpusets filled in)."""
        for hierarchy in cgroup_hierarchies():
            for folder in (hierarchy / self.name,
                           *(hierarchy / self.name / node for node in nodes)):
                folder.mkdir(exist_ok=True)
                for knob in ("cpuset.cpus", "cpuset.mems"):
                    mine, parents = folder / knob, folder.parent / knob
                    if mine.exists() and not mine.read_text().strip():
                        mine.write_text(parents.read_text().strip())

    def folders(self) -> list[pathlib.Path]:
        """Every folder under the root, deepest first."""
        found: list[pathlib.Path] = []
        for hierarchy in cgroup_hierarchies():
            top = hierarchy / self.name
            if top.is_dir():
                found += [pathlib.Path(d) for d, _, _ in os.walk(top)]
        return sorted(found, key=lambda p: len(p.parts), reverse=True)

    def pids(self) -> set[int]:
        """Processes still in the tree."""
        pids: set[int] = set()
        for folder in self.folders():
            with contextlib.suppress(OSError):
                pids |= {int(p) for p in (folder / "cgroup.procs").read_text().split()}
        return pids

    def destroy(self, timeout: float = 10.0) -> None:
        """Kill what is left inside, then remove every folder (deepest first)."""
        deadline = time.monotonic() + timeout
        while True:
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            busy = []
            for folder in self.folders():
                try:
                    folder.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    busy.append(folder)
            if not busy:
                return
            if time.monotonic() > deadline:
                raise HostStateError(f"cgroups still busy after {timeout}s: "
                                     f"{', '.join(map(str, busy[:5]))}")
            time.sleep(0.1)


def leftover_cgroups() -> list[CgroupRoot]:
    """Cgroup roots of environments whose process has ended (``<pid>b<block>`` tags)."""
    found = []
    for hierarchy in cgroup_hierarchies():
        with contextlib.suppress(OSError):
            for entry in hierarchy.iterdir():
                tag = entry.name.removeprefix(CGROUP_PREFIX)
                pid = tag.split("b")[0]
                if entry.name.startswith(CGROUP_PREFIX) and pid.isdigit() \
                        and not processes.alive(int(pid)):
                    found.append(CgroupRoot(tag))
    unique = {root.name: root for root in found}
    return list(unique.values())
