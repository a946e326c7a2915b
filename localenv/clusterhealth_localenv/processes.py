"""Child processes that never outlive the environment that started them.

Each child gets its own session (so the whole group can be signalled) and
``PR_SET_PDEATHSIG`` (so a ``kill -9`` of the parent still takes it down).
Output goes to a log file whose tail is quoted when the process fails
(:func:`wait_answering` turns "never came up" into a :class:`StartError`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import pathlib
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Self

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
SBIN_DIRS = ("/usr/sbin", "/sbin", "/usr/local/sbin")
"""Where Debian puts daemons (not on a normal user's PATH)."""


class StartError(RuntimeError):
    """A server of the environment did not come up; the message quotes its log."""


def free_port(host: str) -> int:
    """An unused TCP port on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def http_ok(url: str, context: ssl.SSLContext | None) -> bool:
    """Whether ``url`` answers 200 within 2 s (blocking; errors are "no")."""
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (a zombie counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def die_with_parent() -> None:
    """``preexec_fn`` for children that must not outlive this process."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def find_executable(name: str, package: str, error: type[Exception]) -> str:
    """``name`` on ``PATH`` or in :data:`SBIN_DIRS`; else ``error`` naming the Debian package."""
    found = shutil.which(name) or shutil.which(name, path=os.pathsep.join(SBIN_DIRS))
    if found is None:
        raise error(f"{name} not found (looked on PATH and in {', '.join(SBIN_DIRS)}): "
                    f"install Debian package {package}")
    return found


class ManagedProcess:
    """One long-running child with a name, a command line and a log file."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: pathlib.Path,
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = env
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The running child's pid, if any."""
        return self._proc.pid if self._proc is not None else None

    def running(self) -> bool:
        """Whether the child is alive."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the child (appending to its log)."""
        if self.running():
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as out:
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        log.debug("started %s (pid %s)", self.name, self._proc.pid)

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the child's output."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def exit_code(self) -> int | None:
        """The exit code once the child has ended."""
        return self._proc.poll() if self._proc is not None else None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to the child's process group."""
        if self._proc is not None and self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, sig)

    def stop_blocking(self, grace: float = 10.0) -> None:
        """:meth:`stop` for synchronous callers (tests' fixtures, blocking helpers)."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            self.kill(signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.kill(signal.SIGKILL)
                proc.wait()

    async def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds; wait for the exit."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            self.kill(signal.SIGTERM)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + grace
            while proc.poll() is None and loop.time() < deadline:
                await asyncio.sleep(0.05)
            if proc.poll() is None:
                self.kill(signal.SIGKILL)
                while proc.poll() is None:
                    await asyncio.sleep(0.02)
        log.debug("stopped %s (exit %s)", self.name, proc.returncode)


async def wait_answering(
    process: ManagedProcess, url: str, context: ssl.SSLContext | None, timeout: float,
    interval: float = 0.2,
) -> None:
    """Wait until ``url`` answers 200; :class:`StartError` quoting the log otherwise.

    Fails at once when the process exits, else after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not process.running():
            raise StartError(
                f"{process.name} exited ({process.exit_code()}):\n{process.log_tail()}"
            )
        if await asyncio.to_thread(http_ok, url, context):
            return
        await asyncio.sleep(interval)
    raise StartError(
        f"{process.name} not answering {url} after {timeout}s:\n{process.log_tail()}"
    )


class LocalService:
    """A real server the tests stop and start (dnsmasq, HAProxy): shared lifecycle.

    Subclasses implement a blocking :meth:`start` that returns once the server
    answers, and keep their :class:`ManagedProcess` in ``_process``.
    """

    stop_grace: float = 5.0
    _process: ManagedProcess | None = None

    def start(self) -> None:
        """Start and wait until the server answers (blocking)."""
        raise NotImplementedError

    def stop(self) -> None:
        """SIGTERM (SIGKILL after a grace period) and wait for the exit (blocking)."""
        if self._process is not None:
            self._process.stop_blocking(grace=self.stop_grace)
        self._stopped()

    def restart(self) -> None:
        """Stop, then start again with the same settings (runtime state is lost)."""
        self.stop()
        self.start()

    async def start_async(self) -> None:
        """:meth:`start` without blocking the event loop."""
        await asyncio.to_thread(self.start)

    async def stop_async(self) -> None:
        """:meth:`stop` without blocking the event loop."""
        if self._process is not None:
            await self._process.stop(grace=self.stop_grace)
        self._stopped()

    def _stopped(self) -> None:
        """After every stop, the server exited: remove what the service made for itself."""

    async def restart_async(self) -> None:
        """:meth:`restart` without blocking the event loop."""
        await self.stop_async()
        await self.start_async()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        await self.start_async()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop_async()
