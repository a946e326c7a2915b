"""Discovery benchmark (issue 22): the cluster-status controller's reads of members' served APIs.

Every probe of a Ready member reads its aggregated discovery (``/api`` and
``/apis``).  Two ways, alternating trial by trial in one run against one real
kube-apiserver (the environment's member ``m1``), each with ``--members``
clients of it (one connection pool each, as the pool gives every member its
own) probed together ``--rounds`` times per trial:

* old: both documents read and parsed every probe (the controller before
  this change: ``GET`` with the aggregated Accept header, then
  ``decision.aggregated_enablements``);
* new: :class:`clusterhealth_controlplane.clusterstatus.discovery.Discovery`,
  ``If-None-Match`` with the last tags; unchanged documents are ``304`` and the
  last enablements are reused (steady state: warmed by one read first).

Per probe (one member's discovery read): this process's CPU (``process_time``:
the client, TLS, JSON and the parse), the member API server's CPU (``utime +
stime`` from ``/proc``), requests, response body bytes, and the wall time of a
round of all members.  Run under ``flock /tmp/clusterhealth-bench.lock``:
``python -m bench.discovery [--members 10] [--rounds 20] [--trials 7]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import pathlib
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from bench import report, takeover
from clusterhealth_controlplane.clusterstatus import decision, discovery
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import transport
from clusterhealth_localenv import environment

SECTION_TITLE = "## Members' discovery on every probe (issue 22)"
MEMBER = "m1"
Enablements = tuple[list[dict[str, Any]], bool]


class Counting:
    """A transport that counts the requests and response body bytes through it."""

    def __init__(self, inner: transport.Transport) -> None:
        self.inner = inner
        self.target = inner.target
        self.proxy = inner.proxy
        self.requests = 0
        self.bytes = 0
        self.not_modified = 0

    async def request(self, method: str, path: str, *, query: Mapping[str, str] | None = None,
                      headers: transport.Headers = (), body: bytes | None = None,
                      read_timeout: float | None = 30.0,
                      deadline: float | None = None) -> transport.Response:
        """The inner transport's answer, counted."""
        response = await self.inner.request(method, path, query=query, headers=headers,
                                            body=body, read_timeout=read_timeout,
                                            deadline=deadline)
        self.requests += 1
        self.bytes += len(response.body)
        self.not_modified += response.status == kube.NOT_MODIFIED
        return response

    def stream(self, method: str, path: str, *, query: Mapping[str, str] | None = None,
               headers: transport.Headers = (), idle_timeout: float | None = None
               ) -> contextlib.AbstractAsyncContextManager[transport.Streamed]:
        """The inner transport's stream (not counted: discovery is not streamed)."""
        return self.inner.stream(method, path, query=query, headers=headers,
                                 idle_timeout=idle_timeout)

    async def close(self) -> None:
        """Close the inner transport."""
        await self.inner.close()


async def old_read(api: kube.ApiClient, timeout: float) -> Enablements:
    """The controller's aggregated discovery read before this change."""
    async with asyncio.timeout(timeout):
        documents = [await api.request("GET", path, backoff=discovery.ONE_ATTEMPT,
                                       headers={"Accept": discovery.ACCEPT})
                     for path in discovery.PATHS]
    assert all(decision.is_aggregated(d) for d in documents)
    return decision.aggregated_enablements(documents)


def _server_cpu(pid: int) -> float:
    """Seconds of CPU (user + system) the process has used."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.asynccontextmanager
async def _clients(env: environment.LocalEnvironment, count: int, http: transport.Library
                   ) -> AsyncIterator[list[tuple[kube.ApiClient, Counting]]]:
    async with contextlib.AsyncExitStack() as stack:
        made = []
        for _ in range(count):
            api = await stack.enter_async_context(env.client(MEMBER, http=http))
            counting = Counting(api._pool.http())  # the bench's own window on the wire
            api._pool.connections = counting
            made.append((api, counting))
        yield made


async def measure(members: int, rounds: int, trials: int, http: transport.Library
                  ) -> list[report.Figure]:
    """Alternate the two reads over ``trials``; the figures per probe."""
    config = environment.EnvironmentConfig(members=(MEMBER,), register_members=False)
    async with environment.LocalEnvironment(config) as env, _clients(env, members, http) as clients:
        pid = env.servers[MEMBER].process.pid
        assert pid is not None
        reads = discovery.Discovery(timeout=10.0)
        expected = await old_read(clients[0][0], 10.0)
        for index, (api, _) in enumerate(clients):  # the steady state: tags known
            assert await reads.enablements(f"member{index}", api) == expected

        def new(index: int, api: kube.ApiClient) -> Awaitable[Enablements]:
            return reads.enablements(f"member{index}", api)

        def old(index: int, api: kube.ApiClient) -> Awaitable[Enablements]:
            return old_read(api, 10.0)

        ways: dict[str, Callable[[int, kube.ApiClient], Awaitable[Enablements]]] = {
            "old (read and parse every probe)": old, "new (If-None-Match, 304 reused)": new}
        samples: dict[str, dict[str, list[float]]] = {
            way: {k: [] for k in ("cpu", "server", "requests", "bytes", "round", "304")}
            for way in ways}
        probes = members * rounds
        for trial in range(trials):
            order = list(ways) if trial % 2 == 0 else list(reversed(ways))
            for way in order:
                for _, counting in clients:
                    counting.requests = counting.bytes = counting.not_modified = 0
                cpu, server, wall = time.process_time(), _server_cpu(pid), time.monotonic()
                for _ in range(rounds):
                    found = await asyncio.gather(*(ways[way](i, api)
                                                   for i, (api, _) in enumerate(clients)))
                    assert all(result == expected for result in found)
                figures = samples[way]
                figures["cpu"].append((time.process_time() - cpu) * 1000 / probes)
                figures["server"].append((_server_cpu(pid) - server) * 1000 / probes)
                figures["round"].append((time.monotonic() - wall) * 1000 / rounds)
                figures["requests"].append(sum(c.requests for _, c in clients) / probes)
                figures["bytes"].append(sum(c.bytes for _, c in clients) / probes)
                figures["304"].append(sum(c.not_modified for _, c in clients) / probes)
                takeover.progress(f"trial {trial + 1}/{trials} {way}: "
                                  f"{figures['cpu'][-1]:.2f} ms CPU/probe, "
                                  f"{figures['bytes'][-1]:.0f} B/probe")
    result = []
    for way, figures in samples.items():
        result += [
            report.Figure(f"{way}: our CPU per probe", tuple(figures["cpu"]), "ms"),
            report.Figure(f"{way}: API server CPU per probe", tuple(figures["server"]), "ms"),
            report.Figure(f"{way}: requests per probe", tuple(figures["requests"]), "requests"),
            report.Figure(f"{way}: of them 304", tuple(figures["304"]), "requests"),
            report.Figure(f"{way}: response body bytes per probe", tuple(figures["bytes"]),
                          "bytes"),
            report.Figure(f"{way}: a round of {members} members (wall)",
                          tuple(figures["round"]), "ms"),
        ]
    old_cpu, new_cpu = (samples[way]["cpu"] for way in ways)
    result.append(report.Figure("our CPU per probe, old / new (same trial)",
                                tuple(o / n for o, n in zip(old_cpu, new_cpu, strict=True)),
                                "x"))
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table, optionally update docs/benchmarks.md."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench.discovery")
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--trials", type=int, default=7)
    parser.add_argument("--http", choices=transport.LIBRARIES, default="httpx",
                        help="the members' clients' HTTP library (the member pool's: httpx)")
    parser.add_argument("--markdown", type=pathlib.Path, default=None)
    options = parser.parse_args(args)
    figures = asyncio.run(measure(options.members, options.rounds, options.trials,
                                  options.http))
    print(report.text_table(figures))
    if options.markdown is not None:
        notes = [
            f"One real kube-apiserver stands in for {options.members} members: each member is "
            f"its own client ({options.http}, its own connection pool), all probed at once, "
            f"{options.rounds} rounds per trial; the two ways alternate (their order too) in "
            "every trial. Discovery only: the probe's /readyz and /version are not in it. "
            "Body bytes exclude headers and TLS.",
        ]
        command = report.command_line("bench.discovery", args)
        report.write_section(options.markdown, SECTION_TITLE,
                             report.section(SECTION_TITLE, figures, notes, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
