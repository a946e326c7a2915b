r"""An asyncio client of HAProxy's runtime API (the ``stats socket`` CLI), and its parsers.

HAProxy cannot add frontends or backends at runtime, but through this
socket it can change map entries and a server's address, weight and
administrative state -- everything the provider needs.  The client keeps one
connection in *prompt* mode (HAProxy answers each command and ends the reply
with ``"\\n> "``), so a burst of commands costs one round trip each instead
of one connection each; commands are serialized by a lock.  A reused
connection that turns out dead (HAProxy's ``stats timeout`` closed it, or
HAProxy restarted) is replaced once, transparently; every other failure is
a :class:`RuntimeApiError`.  A command cancelled before its reply was read
closes the connection, so that reply is never taken for the next command's.
:attr:`RuntimeClient.connections` counts the connections opened, so the
caller can notice that HAProxy may have been restarted under it.

Given a ``guard`` (the leader-election fence, as for API writes), every
command that changes something asks it immediately before the command is
written to the socket: a former leader, paused past its Lease and resumed,
sends HAProxy nothing but ``show`` commands (:class:`RuntimeFenced`).

The parsers are pure functions over the text HAProxy 2.6 prints, tested on
captured output.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import csv
import dataclasses
import io
import re
from collections.abc import Callable, Iterable

from clusterhealth_core.kube import errors
from clusterhealth_mci.providers import base

PROMPT = b"\n> "
READ_LIMIT = 64 * 1024 * 1024
"""Largest reply accepted (``show stat`` for 256 x 32 servers is a few MB)."""

# srv_admin_state bits (HAProxy's SRV_ADMF_*).  CMAINT (0x04, "disabled" in the
# configuration) stays set after "state ready" on 2.6 and means nothing then.
ADMIN_FMAINT = 0x01
ADMIN_IMAINT = 0x02
ADMIN_CMAINT = 0x04
ADMIN_FDRAIN = 0x08
ADMIN_IDRAIN = 0x10
ADMIN_RMAINT = 0x20
ADMIN_HMAINT = 0x40
_MAINT_BITS = ADMIN_FMAINT | ADMIN_IMAINT | ADMIN_RMAINT | ADMIN_HMAINT
_DRAIN_BITS = ADMIN_FDRAIN | ADMIN_IDRAIN

_UNIX_PREFIX = "unix@"
_TCP = re.compile(
    r"^(?:ipv4@|ipv6@|tcp@)?(?:\[(?P<v6>[0-9a-fA-F:.]+)\]|(?P<host>[^:/\s]+)):(?P<port>\d+)$")


class RuntimeApiError(base.ProviderError):
    """HAProxy refused a command, answered something unexpected, or could not be reached."""

    def __init__(self, message: str, command: str | None = None, reply: str | None = None) -> None:
        super().__init__(message)
        self.command = command
        self.reply = reply


class RuntimeConnectionError(RuntimeApiError):
    """The runtime API socket could not be reached or broke mid-command."""


class RuntimeFenced(RuntimeApiError):
    """A command that changes HAProxy refused locally: this process may no longer lead."""


READ_ONLY = ("show ", "help", "prompt", "quit")
"""Commands that change nothing (sent without asking the guard)."""


def changes_state(command: str) -> bool:
    """Whether ``command`` changes HAProxy (anything but ``show ...``, ``help``, ...)."""
    return not (command == "show" or command.startswith(READ_ONLY))


@dataclasses.dataclass(frozen=True)
class ServerState:
    """One line of ``show servers state``."""

    backend: str
    server: str
    server_id: int
    address: str
    port: int
    op_state: int
    """0 stopped, 1 starting, 2 running, 3 stopping."""
    admin_state: int
    """SRV_ADMF_* bits."""
    weight: int
    """The user weight (``set server ... weight``)."""

    @property
    def mode(self) -> str:
        """``maint``, ``drain`` or ``ready`` (the administrative state we set)."""
        if self.admin_state & _MAINT_BITS:
            return "maint"
        if self.admin_state & _DRAIN_BITS:
            return "drain"
        return "ready"


@dataclasses.dataclass(frozen=True)
class StatRow:
    """The columns of one ``show stat`` row that the provider reads."""

    proxy: str
    name: str
    """``FRONTEND``, ``BACKEND`` or a server's name."""
    queued: int
    sessions: int
    """Current sessions (``scur``): streams being served, idle pooled connections excluded."""
    status: str
    weight: int
    total: int
    """Sessions ever served (``stot``)."""


@dataclasses.dataclass(frozen=True)
class MapEntry:
    """One line of ``show map <map>``."""

    ref: str
    key: str
    value: str


# -- parsers --------------------------------------------------------------------------------


def parse_info(text: str) -> dict[str, str]:
    """``show info``: ``Name: value`` lines."""
    info: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep:
            info[name.strip()] = value.strip()
    return info


def parse_servers_state(text: str) -> list[ServerState]:
    """``show servers state [backend]`` (format version 1)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise RuntimeApiError("empty 'show servers state' reply", reply=text)
    if lines[0].strip() != "1":
        raise RuntimeApiError(f"unsupported 'show servers state' format {lines[0]!r}", reply=text)
    columns: list[str] = []
    states: list[ServerState] = []
    for line in lines[1:]:
        if line.startswith("#"):
            columns = line[1:].split()
            continue
        fields = dict(zip(columns, line.split(), strict=False))
        try:
            states.append(ServerState(
                backend=fields["be_name"],
                server=fields["srv_name"],
                server_id=int(fields["srv_id"]),
                address=fields["srv_addr"],
                port=int(fields["srv_port"]),
                op_state=int(fields["srv_op_state"]),
                admin_state=int(fields["srv_admin_state"]),
                weight=int(fields["srv_uweight"]),
            ))
        except (KeyError, ValueError) as exc:
            raise RuntimeApiError(f"unparsable 'show servers state' line {line!r}: {exc}",
                                  reply=text) from exc
    return states


def _int(value: str | None) -> int:
    return int(value) if value else 0


def parse_stat(text: str) -> list[StatRow]:
    """``show stat`` (CSV with a ``# `` header line)."""
    if not text.startswith("# "):
        raise RuntimeApiError("'show stat' reply without a CSV header", reply=text)
    rows: list[StatRow] = []
    reader = csv.DictReader(io.StringIO(text[2:]))
    try:
        for row in reader:
            if not row.get("pxname"):
                continue
            rows.append(StatRow(
                proxy=row["pxname"],
                name=row["svname"],
                queued=_int(row.get("qcur")),
                sessions=_int(row.get("scur")),
                status=row.get("status") or "",
                weight=_int(row.get("weight")),
                total=_int(row.get("stot")),
            ))
    except (KeyError, ValueError, csv.Error) as exc:
        raise RuntimeApiError(f"unparsable 'show stat' reply: {exc}", reply=text) from exc
    return rows


def parse_map(text: str) -> list[MapEntry]:
    """``show map <map>``: ``<ref> <key> <value>`` lines."""
    entries: list[MapEntry] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split(" ", 2)
        if len(parts) != 3:
            raise RuntimeApiError(f"unparsable 'show map' line {line!r}", reply=text)
        entries.append(MapEntry(*parts))
    return entries


def escape(word: str) -> str:
    """One CLI argument: backslash, ``;`` and whitespace are escaped (``;`` separates commands)."""
    if not word or any(c in word for c in "\r\n"):
        raise RuntimeApiError(f"cannot pass {word!r} to the runtime API")
    return re.sub(r"([\\; \t])", r"\\\1", word)


def expect_empty(command: str, reply: str) -> None:
    """Raise unless HAProxy answered a write command with nothing (its way of saying OK)."""
    if reply.strip():
        raise RuntimeApiError(f"HAProxy refused {command!r}: {reply.strip()}", command, reply)


def expect_addr_changed(command: str, reply: str) -> None:
    """Raise unless the reply to ``set server ... addr`` says the address changed (or was right)."""
    text = reply.strip()
    if not (text.startswith("IP changed") or text.startswith("no need to change")
            or text.startswith("port changed")):
        raise RuntimeApiError(f"HAProxy refused {command!r}: {text}", command, reply)


def parse_address(address: str) -> tuple[str, int] | str:
    """``host:port`` (TCP, also ``ipv4@``/``[v6]:port``) or a UNIX socket path (also ``unix@``)."""
    if address.startswith(_UNIX_PREFIX):
        return address[len(_UNIX_PREFIX):]
    match = _TCP.match(address)
    if match is not None and "/" not in address:
        return match.group("v6") or match.group("host"), int(match.group("port"))
    return address


# -- the client -----------------------------------------------------------------------------


class RuntimeClient:
    """One prompt-mode connection to HAProxy's runtime API; commands run one at a time."""

    def __init__(self, address: str, *, timeout: float = 5.0,
                 guard: Callable[[], None] | None = None) -> None:
        self.address = address
        self.timeout = timeout
        self.guard = guard
        """Asked before every command that changes HAProxy; raises ``errors.NotLeader``."""
        self.connections = 0
        """Connections opened so far (a new one may mean a new HAProxy process)."""
        self.history: collections.deque[str] = collections.deque(maxlen=1000)
        """The last commands sent (debugging, tests)."""
        self._target = parse_address(address)
        self._lock = asyncio.Lock()
        self._stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def execute(self, command: str) -> str:
        """Run one command; HAProxy's reply without the prompt (``""`` for a silent OK)."""
        if "\n" in command or "\r" in command:
            raise RuntimeApiError(f"a command is one line: {command!r}")
        async with self._lock:
            for attempt in range(2):
                reused = self._stream is not None
                try:
                    reader, writer = await self._connection()
                    self._fence(command)  # the last step before the command is written
                    self.history.append(command)
                    async with asyncio.timeout(self.timeout):
                        raw = await self._roundtrip(reader, writer, command)
                except asyncio.IncompleteReadError as exc:
                    await self._drop()
                    if reused and not exc.partial and attempt == 0:
                        continue  # the idle connection had been closed: once more, fresh
                    raise RuntimeConnectionError(
                        f"{self.address}: connection closed during {command!r}", command) from exc
                except (ConnectionError, OSError) as exc:
                    await self._drop()
                    if reused and attempt == 0:
                        continue
                    raise RuntimeConnectionError(
                        f"{self.address}: {command!r} failed: {exc}", command) from exc
                except TimeoutError as exc:
                    await self._drop()
                    raise RuntimeConnectionError(
                        f"{self.address}: no reply to {command!r} within {self.timeout:g}s",
                        command) from exc
                except asyncio.LimitOverrunError as exc:
                    await self._drop()
                    raise RuntimeApiError(f"reply to {command!r} too large", command) from exc
                except asyncio.CancelledError:
                    # cancelled between writing the command and reading its whole reply (a term
                    # of leadership ending): that reply would be read as the next command's
                    self._discard()
                    raise
                return raw[: -len(PROMPT)].decode(errors="replace")
        raise AssertionError("unreachable")  # pragma: no cover

    async def execute_all(self, commands: Iterable[str]) -> list[str]:
        """Run several commands in order (stops at the first connection failure)."""
        return [await self.execute(command) for command in commands]

    async def close(self) -> None:
        """Close the connection (a later command opens a new one)."""
        async with self._lock:
            await self._drop()

    # -- typed commands -----------------------------------------------------------------------

    async def show_info(self) -> dict[str, str]:
        """``show info``."""
        info = parse_info(await self.execute("show info"))
        if "Pid" not in info:
            raise RuntimeApiError("'show info' without Pid", "show info")
        return info

    async def show_servers_state(self, backend: str | None = None) -> list[ServerState]:
        """``show servers state [backend]``."""
        command = "show servers state" + (f" {escape(backend)}" if backend else "")
        reply = await self.execute(command)
        if not reply.startswith("1\n"):
            raise RuntimeApiError(f"{command!r}: {reply.strip()}", command, reply)
        return parse_servers_state(reply)

    async def show_stat_servers(self, proxy: str | None = None) -> list[StatRow]:
        """``show stat <proxy|-1> 4 -1``: the server rows."""
        command = f"show stat {escape(proxy) if proxy else '-1'} 4 -1"
        reply = await self.execute(command)
        if not reply.startswith("# "):
            raise RuntimeApiError(f"{command!r}: {reply.strip()}", command, reply)
        return parse_stat(reply)

    async def show_map(self, map_name: str) -> list[MapEntry]:
        """``show map <map>``."""
        command = f"show map {escape(map_name)}"
        reply = await self.execute(command)
        if reply.startswith(("Unknown map", "Missing", "Permission")):
            raise RuntimeApiError(f"{command!r}: {reply.strip()}", command, reply)
        return parse_map(reply)

    async def add_map(self, map_name: str, key: str, value: str) -> None:
        """``add map`` (a second ``add`` of a key makes a duplicate: callers diff first)."""
        await self._write(f"add map {escape(map_name)} {escape(key)} {escape(value)}")

    async def set_map(self, map_name: str, key: str, value: str) -> None:
        """``set map`` (every entry with that key)."""
        await self._write(f"set map {escape(map_name)} {escape(key)} {escape(value)}")

    async def del_map(self, map_name: str, key: str) -> None:
        """``del map`` (every entry with that key)."""
        await self._write(f"del map {escape(map_name)} {escape(key)}")

    async def set_server_addr(self, backend: str, server: str, address: str, port: int) -> None:
        """``set server <b>/<s> addr <ip> port <port>``."""
        command = (f"set server {escape(backend)}/{escape(server)} "
                   f"addr {escape(address)} port {port}")
        expect_addr_changed(command, await self.execute(command))

    async def set_server_weight(self, backend: str, server: str, weight: int) -> None:
        """``set server <b>/<s> weight <w>``."""
        await self._write(f"set server {escape(backend)}/{escape(server)} weight {weight}")

    async def set_server_state(self, backend: str, server: str, state: str) -> None:
        """``set server <b>/<s> state ready|drain|maint``."""
        if state not in ("ready", "drain", "maint"):
            raise RuntimeApiError(f"unknown server state {state!r}")
        await self._write(f"set server {escape(backend)}/{escape(server)} state {state}")

    # -- internals ----------------------------------------------------------------------------

    async def _write(self, command: str) -> None:
        expect_empty(command, await self.execute(command))

    def _fence(self, command: str) -> None:
        if self.guard is None or not changes_state(command):
            return
        try:
            self.guard()
        except errors.NotLeader as exc:
            raise RuntimeFenced(f"{self.address}: {command!r} not sent: {exc}", command) from exc

    @staticmethod
    async def _roundtrip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                         command: str) -> bytes:
        writer.write(command.encode() + b"\n")
        await writer.drain()
        return await reader.readuntil(PROMPT)

    async def _connection(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._stream is not None:
            return self._stream
        target = self._target
        try:
            if isinstance(target, str):
                opening = asyncio.open_unix_connection(target, limit=READ_LIMIT)
            else:
                opening = asyncio.open_connection(target[0], target[1], limit=READ_LIMIT)
            async with asyncio.timeout(self.timeout):
                reader, writer = await opening
        except (OSError, TimeoutError) as exc:
            raise RuntimeConnectionError(f"cannot reach HAProxy at {self.address}: {exc}") from exc
        self._stream = (reader, writer)
        self.connections += 1
        writer.write(b"prompt\n")
        await writer.drain()
        async with asyncio.timeout(self.timeout):
            await reader.readuntil(PROMPT)
        return self._stream

    def _discard(self) -> None:
        """Close the connection at once (no await: for a cancelled command)."""
        stream, self._stream = self._stream, None
        if stream is not None:
            stream[1].close()

    async def _drop(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream[1].close()
            with contextlib.suppress(OSError, ConnectionError, TimeoutError):
                async with asyncio.timeout(1.0):
                    await stream[1].wait_closed()
