"""``make demo`` end to end: the whole chain under traffic, ending by itself; and Ctrl-C.

The demo runs as a user runs it (``python -m clusterhealth_localenv.demo``, a
process of its own).  The tests read what it prints: the phases in order,
each step of the chain in order, the summary's numbers; and they check that
no process it started outlives it (every descendant seen while it ran, and
anything whose command line names its work directory).
"""

from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import time
from collections.abc import Callable

import pytest

DEMO_TIMEOUT = 600.0


def _starttime(pid: int) -> str | None:
    """Field 22 of /proc/<pid>/stat (None: no such process), to tell a reused pid apart."""
    try:
        text = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()[19]


def _descendants(root: int) -> dict[int, str]:
    """Every living descendant of ``root``: pid -> start time."""
    children: dict[int, list[int]] = {}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: dict[int, str] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        start = _starttime(pid)
        if start is not None:
            found[pid] = start
        todo += children.get(pid, [])
    return found


def _naming(text: str) -> list[str]:
    """Command lines of living processes that contain ``text``."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in argv:
            found.append(f"{entry.name}: {argv[:200]}")
    return found


def _leftovers(seen: dict[int, str], workdir: pathlib.Path) -> list[str]:
    alive = [f"{pid} (still running)" for pid, start in seen.items()
             if _starttime(pid) == start]
    return alive + _naming(str(workdir))


class Demo:
    """The demo as a child process, its output in a file."""

    def __init__(self, python: str, env: dict[str, str], workdir: pathlib.Path,
                 *extra: str) -> None:
        self.workdir = workdir
        self.out = workdir.parent / "demo.out"
        with self.out.open("w") as out:
            self.proc = subprocess.Popen(
                [python, "-m", "clusterhealth_localenv.demo", "--workdir", str(workdir),
                 *extra], stdout=out, stderr=subprocess.STDOUT, env=env)
        self.seen: dict[int, str] = {}

    def text(self) -> str:
        return self.out.read_text(errors="replace")

    def _poll(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        """Until ``done()``, noting the descendants meanwhile."""
        deadline = time.monotonic() + timeout
        while not done():
            self.seen.update(_descendants(self.proc.pid))
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} not within {timeout:.0f} s:\n{self.text()[-4000:]}")
            time.sleep(0.5)
        self.seen.update(_descendants(self.proc.pid))

    def wait_for(self, needle: str, timeout: float) -> None:
        """Until the output contains ``needle`` (the demo must still run)."""
        def seen() -> bool:
            if self.proc.poll() is not None and needle not in self.text():
                raise AssertionError(f"the demo exited ({self.proc.returncode}) before "
                                     f"{needle!r}:\n{self.text()[-4000:]}")
            return needle in self.text()
        self._poll(seen, timeout, repr(needle))

    def finish(self, timeout: float) -> int:
        """Wait for the exit."""
        self._poll(lambda: self.proc.poll() is not None, timeout, "the demo's exit")
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def assert_clean(self) -> None:
        """No traceback, no process left, its pod network gone."""
        out = self.text()
        assert "Traceback" not in out, out[-4000:]
        assert _leftovers(self.seen, self.workdir) == []
        assert not [n for n in _netns() if n.endswith(f"-{self.proc.pid}")]


def _in_order(text: str, needles: list[str]) -> None:
    at = 0
    for needle in needles:
        found = text.find(needle, at)
        assert found >= 0, f"{needle!r} not found after position {at}:\n{text[at:][-6000:]}"
        at = found + len(needle)


PHASE = re.compile(r"phase (\d) \((.*?)\): ([\d.]+) s, (\d+) answered "
                   r"\(member1 (\d+), member2 (\d+)\), (\d+) failed")
TOTAL = re.compile(r"all traffic: (\d+) answered, (\d+) failed")


@pytest.mark.timeout(DEMO_TIMEOUT + 60)
def test_the_demo_runs_the_whole_chain_and_ends_by_itself(
        python: str, python_env: dict[str, str], tmp_path: pathlib.Path) -> None:
    demo = Demo(python, python_env, tmp_path / "demo")
    try:
        demo.wait_for(">>> phase 2", DEMO_TIMEOUT)  # every process is running by now
        code = demo.finish(DEMO_TIMEOUT)
    finally:
        demo.kill()
    out = demo.text()
    assert code == 0, out[-6000:]
    _in_order(out, [
        ">>> phase 1",
        "member1's DNS server stopped",
        "member1: ServiceDomainNameResolutionReady False",
        "member1: remedyActions [TrafficControl]",
        "MultiClusterIngress: trafficBlockClusters [member1]",
        "HAProxy: member1's server drained",
        "requests sent in the 5 s since: member2 answered",
        "member1's DNS server started",
        "member1: ServiceDomainNameResolutionReady True",
        "member1: remedyActions [] (TrafficControl cleared)",
        "MultiClusterIngress: trafficBlockClusters []",
        "HAProxy: member1's server takes traffic again",
        "traffic returns to both members",
        ">>> phase 2",
        "member1's API server, controller manager and scheduler stopped",
        "member1: Ready False",
        "member1: taint cluster.karmada.io/not-ready:NoSchedule",
        "member1: taint cluster.karmada.io/not-ready:NoExecute",
        "binding evicted from member1",
        "member2 runs 3 Ready Pods",
        "member1's API server, controller manager and scheduler started",
    ])
    phase2 = out[out.index(">>> phase 2"):out.index(">>> phase 3")]
    restarted = phase2.index("member1's API server, controller manager and scheduler started")
    for step in ("member1: Ready True", "member1: taints removed",
                 "member1: the stale Deployment removed", "member1: the old Pod deleted"):
        assert phase2.find(step, restarted) > 0, (step, phase2)
    _in_order(phase2[restarted:], ["member1: taints removed", "failback: member1 runs 1 Pod",
                                   "HAProxy: member1 1 Pod, member2 2 Pods take traffic",
                                   "traffic returns to both members"])
    # while drained, no request sent after the drain reached member1
    drained = re.search(r"requests sent in the 5 s since: member2 answered (\d+), member1 (\d+)",
                        out)
    assert drained is not None and int(drained[1]) > 0 and int(drained[2]) == 0, drained

    summary = out[out.index(">>> phase 3: summary"):]
    phases = PHASE.findall(summary)
    assert [p[0] for p in phases] == ["1", "2"], summary
    for _, _, seconds, answered, member1, member2, failed in phases:
        assert float(seconds) > 0
        assert int(member1) > 0 and int(member2) > 0
        assert int(answered) == int(member1) + int(member2)
        assert int(failed) == 0, summary
    total = TOTAL.search(summary)
    assert total is not None and int(total[1]) > 0 and int(total[2]) == 0, summary
    logs = re.search(r"logs: (\S+) \(one file per process\)", summary)
    assert logs is not None and pathlib.Path(logs[1]) == demo.workdir / "logs"
    for name in ("controller-manager.log", "scheduler.log", "mci-provider.log",
                 "remedy-controller.log", "haproxy.log", "member1-apiserver.log"):
        assert (demo.workdir / "logs" / name).exists(), name
    assert "everything stopped" in out
    demo.assert_clean()


@pytest.mark.timeout(DEMO_TIMEOUT + 60)
def test_ctrl_c_mid_run_stops_every_process(python: str, python_env: dict[str, str],
                                            tmp_path: pathlib.Path) -> None:
    demo = Demo(python, python_env, tmp_path / "demo")
    try:  # interrupted while member1's control plane is down: the hardest teardown
        demo.wait_for("member1's API server, controller manager and scheduler stopped",
                      DEMO_TIMEOUT)
        assert len(demo.seen) > 10, demo.seen  # the environment and the components run
        demo.proc.send_signal(signal.SIGINT)
        code = demo.finish(120)
    finally:
        demo.kill()
    out = demo.text()
    assert code == 130, out[-4000:]
    _in_order(out, ["SIGINT: stopping", ">>> summary of the run so far (stopped early)",
                    "phase 1 (", "phase 2 (member1's control plane fails, then recovers): "
                    "interrupted", "stopping every process of the demo", "everything stopped"])
    demo.assert_clean()


@pytest.mark.timeout(DEMO_TIMEOUT + 60)
def test_follow_keeps_watching_until_ctrl_c(python: str, python_env: dict[str, str],
                                            tmp_path: pathlib.Path) -> None:
    demo = Demo(python, python_env, tmp_path / "demo", "--follow", "--every", "2")
    try:
        demo.wait_for("following (--follow)", DEMO_TIMEOUT)
        following = demo.text().index("following (--follow)")
        while demo.text().count("traffic, last 2 s", following) < 2:  # still at work
            assert demo.proc.poll() is None, demo.text()[-4000:]
            time.sleep(0.5)
        demo.proc.send_signal(signal.SIGINT)
        code = demo.finish(120)
    finally:
        demo.kill()
    out = demo.text()
    assert code == 0, out[-4000:]
    _in_order(out, [">>> phase 3: summary", "following (--follow)", "traffic, last 2 s",
                    "SIGINT: stopping", "while following: ", "everything stopped"])
    after = re.search(r"while following: (\d+) answered, (\d+) failed", out)
    assert after is not None and int(after[1]) > 0 and int(after[2]) == 0, after
    demo.assert_clean()


def _netns() -> list[str]:
    directory = pathlib.Path("/var/run/netns")
    return [p.name for p in directory.iterdir()] if directory.exists() else []
