"""The command line: arguments, the two commands, and every failure turned into one message.

``clusterhealth remedy test FILE...`` and ``clusterhealth explain cluster
NAME``.  Installed twice, as ``clusterhealth`` and as ``kubectl-clusterhealth``
(``kubectl clusterhealth ...`` runs the latter from ``PATH``); the usage text
names whichever was run.  Whatever goes wrong ends here as one line on
stderr and an exit code from :mod:`clusterhealth_cli.errors`, never as a
traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import os
import pathlib
import shutil
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TextIO, TypeVar

from clusterhealth_cli import (
    completions,
    errors,
    explain,
    fleet,
    join,
    joinplan,
    live,
    remedytest,
    testfile,
)
from clusterhealth_controlplane import options
from clusterhealth_core import buildinfo, retry, settings
from clusterhealth_core import clock as clocks
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config as kubeconfig
from clusterhealth_core.kube import errors as kube_errors

PLUGIN = "kubectl-clusterhealth"
COMPLETE = "__complete"
"""The hidden command the completion scripts run: the candidates for the last word."""
BACKOFF = retry.Backoff(initial=0.2, maximum=1.0, attempts=3)
"""A command should answer within seconds: a few quick retries of transient errors only."""
EXIT_CODES = f"""exit codes:
  {errors.OK}   success (every test passed)
  {errors.TEST_FAILED}   a Remedy test failed
  {errors.USAGE}   bad arguments
  {errors.INPUT}   a file could not be used (not YAML, not a test file, an invalid Remedy)
  {errors.NOT_FOUND}   the Cluster does not exist
  {errors.API}   the control plane could not be used (kubeconfig, unreachable, refused)
  {errors.CONFLICT}   join: the member is registered under another name, or the name is taken
  {errors.INTERNAL}  a bug in this command
"""

Now = Callable[[], datetime.datetime]


def prog_name(argv0: str) -> str:
    """``kubectl clusterhealth`` when run as the kubectl plugin, else ``clusterhealth``."""
    return "kubectl clusterhealth" if os.path.basename(argv0) == PLUGIN else "clusterhealth"


def _commands(parser: argparse.ArgumentParser, dest: str,
              metavar: str) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """The commands under ``parser``: one of them must be given."""
    return parser.add_subparsers(dest=dest, required=True, metavar=metavar)


def _command(commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, *,
             help: str, description: str) -> argparse.ArgumentParser:
    """A command whose help keeps its description's line breaks and ends with the exit codes."""
    return commands.add_parser(name, formatter_class=argparse.RawDescriptionHelpFormatter,
                               help=help, description=description, epilog=EXIT_CODES)


def build_parser(prog: str) -> argparse.ArgumentParser:
    """Every command and flag."""
    parser = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Test Remedies before they reach a cluster, and explain what the "
                    "system thinks of a Cluster (docs/cli.md).",
        epilog=EXIT_CODES)
    parser.add_argument("--version", action="version",
                        version=buildinfo.version_line(prog.split()[-1]))
    commands = _commands(parser, "command", "COMMAND")

    remedy = commands.add_parser("remedy", help="work with Remedies",
                                 description="Work with Remedies.")
    remedy_commands = _commands(remedy, "remedy_command", "COMMAND")
    test = _command(
        remedy_commands, "test",
        help="run Remedy test files (fixture Clusters and their expected remedyActions)",
        description="Run Remedy test files: each case's fixture Clusters go through the "
                    "remedy controller's decision code, and the remedyActions (and, when "
                    "given, remedyActionSources) it would write are compared with the "
                    "expected ones. The file format is in docs/cli.md.")
    test.add_argument("files", nargs="+", metavar="FILE", type=pathlib.Path,
                      help="a test file (YAML), or a folder: every test file in it (Remedy "
                           "manifests beside them are skipped)")
    test.set_defaults(run=run_remedy_test)

    explain_parser = commands.add_parser("explain", help="explain an object of a live control "
                                                         "plane")
    explain_commands = _commands(explain_parser, "explain_command", "KIND")
    cluster = _command(
        explain_commands, "cluster",
        help="a Cluster's conditions and writers, Remedies, taints, evictions and traffic",
        description="Explain one Cluster: its conditions and who wrote them, the Remedies "
                    "covering it and which condition matched, its remedyActions, its taints "
                    "and when the bindings scheduled there are evicted, the "
                    "MultiClusterIngresses blocking its traffic, and the bindings evicted "
                    "from it.")
    cluster.add_argument("name", metavar="NAME", help="the Cluster's name")
    settings.add_kube_flags(cluster, what="the control plane")
    _read_flags(cluster)
    cluster.add_argument(
        "--graceful-eviction-timeout", metavar="DURATION", type=settings.duration,
        default=options.Eviction().graceful_eviction_timeout,
        help="the graceful-eviction controller's --graceful-eviction-timeout, to say when "
             "an eviction task ends at the latest (default: its default, "
             f"{options.Eviction().graceful_eviction_timeout:g}s)")
    cluster.set_defaults(run=run_explain_cluster)
    add_join_parsers(commands)
    status = _command(
        commands, "status",
        help="the fleet on one screen: every Cluster, Ready, DNS, actions, taints, "
             "blocked traffic, evictions, and the leaders",
        description="Every Cluster of the control plane on one line each (Ready, DNS, "
                    "remedy actions, taints, the MultiClusterIngresses blocking its traffic, "
                    "the evictions away from it, the storm guard), then who leads each "
                    "component (its Lease).")
    settings.add_kube_flags(status, what="the control plane")
    _read_flags(status)
    status.set_defaults(run=run_status)
    completion = commands.add_parser(
        "completion", help="print a shell completion script (bash or zsh)",
        description="Print a completion script: `source <(clusterhealth completion bash)`; "
                    "for the kubectl plugin also `kubectl clusterhealth ...` "
                    "(kubectl_complete-clusterhealth, docs/cli.md).")
    completion.add_argument("shell", choices=completions.SHELLS)
    completion.set_defaults(run=run_completion)
    return parser


def _read_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--request-timeout", metavar="DURATION", type=settings.duration,
                        default=10.0,
                        help="give up after this long, the whole command (every request, "
                             "retries included; default: 10s)")
    parser.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text",
                        help="text for people (default), json or yaml for programs")


def run_completion(args: argparse.Namespace, out: TextIO, err: TextIO, now: Now) -> int:
    """Print the completion script for ``args.shell``."""
    out.write(completions.script(args.shell, build_parser("clusterhealth")))
    return errors.OK


def _kinds(text: str) -> tuple[str, ...]:
    try:
        return joinplan.parse_kinds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _cluster_name(text: str) -> str:
    problem = joinplan.check_name(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def add_join_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``join`` and ``unjoin`` (docs/operations.md, "Join a member")."""
    join_parser = _command(
        commands, "join",
        help="register a member cluster with its identities (karmadactl join's shape)",
        description="Register a member cluster in Push mode: its identity in the member "
                    "(ServiceAccount karmada-NAME and its ClusterRole), its token in the "
                    "Secret karmada-cluster/NAME of the control plane (caBundle, token), "
                    "the Cluster, the agent's identity in the control plane (it may write "
                    "only its own Cluster's status) and its kubeconfig Secret in the "
                    "member; optionally the agent and the MCI provider's member RBAC (helm). "
                    "Run it again to repair: what is right stays unchanged.")
    join_parser.add_argument("name", metavar="NAME", type=_cluster_name,
                             help="the Cluster's name (a DNS label, at most 48 characters)")
    _member_flags(join_parser, required=True)
    settings.add_kube_flags(join_parser, what="the control plane")
    join_parser.add_argument(
        "--control-plane-endpoint", metavar="URL", default=None,
        help="the control plane's address as the member's agent reaches it (default: the "
             "--kubeconfig server); use an IP address: the agent must reach it while the "
             "member's DNS is broken")
    join_parser.add_argument("--member-access", choices=joinplan.ACCESS_MODES,
                             default="scoped",
                             help="the member identity's rights: scoped (default) what the "
                                  "controllers do there, full every verb on everything "
                                  "(karmadactl join's)")
    join_parser.add_argument("--member-kinds", metavar="KINDS", type=_kinds,
                             default=joinplan.DEFAULT_KINDS,
                             help="with scoped access, the kinds it may apply: GROUP/RESOURCE "
                                  "or RESOURCE, comma-separated (default: the controlplane "
                                  f"chart's templateKinds, {','.join(joinplan.DEFAULT_KINDS)})")
    join_parser.add_argument("--cluster-provider", default=None, help="Cluster spec.provider")
    join_parser.add_argument("--cluster-region", default=None, help="Cluster spec.region")
    join_parser.add_argument("--agent-chart", metavar="CHART", default=None,
                             help="install the agent in the member with helm from this chart "
                                  "(a folder, a packaged .tgz, repo/name or oci://...)")
    join_parser.add_argument("--agent-values", metavar="FILE", action="append", default=[],
                             help="values for the agent chart (repeatable)")
    join_parser.add_argument("--mci-chart", metavar="CHART", default=None,
                             help="install the MCI provider's read-only member identity "
                                  "(target=member) from this chart and put its token in the "
                                  "control plane's clusterhealth-mci-credentials/<name>")
    join_parser.add_argument("--token-duration", metavar="DURATION", type=settings.duration,
                             default=None,
                             help="issue expiring tokens (TokenRequest API) of this lifetime "
                                  "instead of long-lived token Secrets; run join again before "
                                  "they expire")
    join_parser.add_argument("--wait", metavar="DURATION", type=settings.duration,
                             default=60.0,
                             help="how long a token Secret may take to be filled "
                                  "(default: 60s)")
    join_parser.add_argument("--dry-run", action="store_true",
                             help="read, and print what would be created or configured; "
                                  "change nothing")
    join_parser.set_defaults(run=run_join)

    unjoin_parser = _command(
        commands, "unjoin",
        help="remove a member cluster and what join made for it",
        description="Delete the Cluster, its Secret and the agent's identity in the control "
                    "plane; with --cluster-kubeconfig also the member identity, the agent's "
                    "kubeconfig Secret and the helm releases join installed there. Objects "
                    "join did not make are kept.")
    unjoin_parser.add_argument("name", metavar="NAME", help="the Cluster's name")
    _member_flags(unjoin_parser, required=False)
    settings.add_kube_flags(unjoin_parser, what="the control plane")
    unjoin_parser.add_argument("--wait", metavar="DURATION", type=settings.duration,
                               default=60.0,
                               help="how long the Cluster may take to go (default: 60s)")
    unjoin_parser.add_argument("--dry-run", action="store_true",
                               help="print what would be deleted; change nothing")
    unjoin_parser.set_defaults(run=run_unjoin)


def _member_flags(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument("--cluster-kubeconfig", metavar="PATH", required=required,
                        help="the member cluster's kubeconfig")
    parser.add_argument("--cluster-context", metavar="NAME", default=None,
                        help="its context (default: its current-context)")
    parser.add_argument("--agent-namespace", default=joinplan.AGENT_NAMESPACE,
                        help="the agent's namespace in the member (default: "
                             f"{joinplan.AGENT_NAMESPACE})")
    parser.add_argument("--helm", metavar="PATH", default="helm",
                        help="the helm binary (default: helm on PATH)")


# --- commands ---------------------------------------------------------------------------

def run_remedy_test(args: argparse.Namespace, out: TextIO, err: TextIO, now: Now) -> int:
    """Every file's cases; files that cannot be used are reported and skipped."""
    results: list[remedytest.SuiteResult] = []
    broken = 0
    paths: list[pathlib.Path] = []
    for given in args.files:
        if not given.is_dir():
            paths.append(given)
            continue
        found, manifests = testfile.test_files(given)
        if not found:
            err.write(f"{args.prog}: error: {given}: no Remedy test file in this folder"
                      + (f" ({len(manifests)} manifest(s) only)" if manifests else "") + "\n")
            broken += 1
        paths += found
    for path in paths:
        try:
            suite = testfile.load(path)
        except errors.CliError as exc:
            err.write(f"{args.prog}: error: {exc.message}\n")
            broken += 1
            continue
        results.append(remedytest.run(suite))
    if results:
        out.write(remedytest.render(results))
    if broken:
        return errors.INPUT
    return errors.TEST_FAILED if any(r.failed for r in results) else errors.OK


T = TypeVar("T")


def read_within(args: argparse.Namespace, read: Callable[[kube.ApiClient], Awaitable[T]]) -> T:
    """Run ``read`` against the control plane, all of it within ``--request-timeout``.

    The deadline covers the whole call (every request, retries and their pauses),
    not each attempt: ``--request-timeout 2s`` answers within about two seconds
    also when the server is silent.
    """
    credentials = _load(args.kubeconfig, args.context, "")
    limit: float = args.request_timeout

    async def go() -> T:
        async with kube.ApiClient(credentials, timeout=limit, backoff=BACKOFF,
                                  user_agent="clusterhealth-cli") as api:
            try:
                async with asyncio.timeout(limit):
                    return await read(api)
            except TimeoutError:
                raise errors.CliError(
                    f"no answer from the control plane {credentials.server} within "
                    f"{limit:g}s (--request-timeout)", errors.API) from None

    return _api_errors(lambda: asyncio.run(go()))


def _api_errors(call: Callable[[], T]) -> T:
    try:
        return call()
    except kube_errors.ConfigError as exc:
        raise errors.CliError(f"kubeconfig: {exc}", errors.API) from None
    except kube_errors.Unreachable as exc:
        raise errors.CliError(f"cannot reach the control plane: {exc}", errors.API) from None
    except kube_errors.Unauthorized as exc:
        raise errors.CliError(f"the control plane refused the credentials: {exc}",
                              errors.API) from None
    except kube_errors.KubeError as exc:
        raise errors.CliError(f"the control plane answered with an error: {exc}",
                              errors.API) from None


def run_explain_cluster(args: argparse.Namespace, out: TextIO, err: TextIO, now: Now) -> int:
    """Read the Cluster and what concerns it, then print the explanation."""
    found = read_within(args, lambda api: live.snapshot(api, args.name))
    moment = now()
    result = explain.build(found, moment, args.graceful_eviction_timeout)
    if args.output == "json":
        out.write(explain.to_json(result))
    elif args.output == "yaml":
        out.write(fleet.to_yaml(explain.plain(result)))
    else:
        out.write(explain.render_text(result, moment))
    return errors.OK


def run_status(args: argparse.Namespace, out: TextIO, err: TextIO, now: Now) -> int:
    """Read every Cluster and what concerns it, then print the fleet."""
    found = read_within(args, live.fleet_snapshot)
    if args.output == "json":
        out.write(fleet.to_json(found))
    elif args.output == "yaml":
        out.write(fleet.to_yaml(fleet.to_data(found)))
    else:
        out.write(fleet.render_text(found, now()))
    return errors.OK


def _client(credentials: kubeconfig.Credentials) -> kube.ApiClient:
    return kube.ApiClient(credentials, timeout=10.0, backoff=BACKOFF,
                          user_agent="clusterhealth-cli")


def _load(path: str | None, context: str | None, what: str) -> kubeconfig.Credentials:
    try:
        return kubeconfig.load_default(path, context)
    except kube_errors.ConfigError as exc:
        label = f"{what} kubeconfig" if what else "kubeconfig"
        raise errors.CliError(f"{label}: {exc}", errors.API) from None


def run_join(args: argparse.Namespace, out: TextIO, err: TextIO, now: Now) -> int:
    """Join the member NAME."""
    plane_creds = _load(args.kubeconfig, args.context, "control plane")
    member_creds = _load(args.cluster_kubeconfig, args.cluster_context, "member")
    plane = joinplan.ControlPlane(server=args.control_plane_endpoint or plane_creds.server,
                                  ca=plane_creds.ca_data,
                                  insecure=plane_creds.insecure_skip_tls_verify)
    request = join.JoinRequest(
        name=args.name, plane=plane,
        options=joinplan.Options(access=args.member_access, kinds=args.member_kinds,
                                 provider=args.cluster_provider, region=args.cluster_region,
                                 agent_namespace=args.agent_namespace),
        helm=join.Helm(binary=args.helm, kubeconfig=args.cluster_kubeconfig,
                       context=args.cluster_context, agent_chart=args.agent_chart,
                       agent_values=tuple(args.agent_values), mci_chart=args.mci_chart),
        dry_run=args.dry_run, wait=args.wait, token_duration=args.token_duration)

    async def go() -> None:
        async with _client(plane_creds) as cp, _client(member_creds) as member:
            await join.join(request, cp, member, out)

    asyncio.run(go())
    return errors.OK


def run_unjoin(args: argparse.Namespace, out: TextIO, err: TextIO, now: Now) -> int:
    """Unjoin the member NAME."""
    plane_creds = _load(args.kubeconfig, args.context, "control plane")
    member_creds = (_load(args.cluster_kubeconfig, args.cluster_context, "member")
                    if args.cluster_kubeconfig else None)
    helm = (join.Helm(binary=args.helm, kubeconfig=args.cluster_kubeconfig,
                      context=args.cluster_context)
            if args.cluster_kubeconfig and shutil.which(args.helm) else None)
    request = join.UnjoinRequest(name=args.name, agent_namespace=args.agent_namespace,
                                 helm=helm, dry_run=args.dry_run, wait=args.wait)

    async def go() -> None:
        async with _client(plane_creds) as cp:
            if member_creds is None:
                await join.unjoin(request, cp, None, out)
                return
            async with _client(member_creds) as member:
                await join.unjoin(request, cp, member, out)

    asyncio.run(go())
    return errors.OK


# --- entry point ------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None,
         err: TextIO | None = None, now: Now | None = None,
         argv0: str | None = None) -> int:
    """Parse ``argv``, run the command, return the exit code (see :mod:`.errors`)."""
    out = out or sys.stdout
    err = err or sys.stderr
    prog = prog_name(argv0 if argv0 is not None else sys.argv[0])
    parser = build_parser(prog)
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == [COMPLETE]:  # what the completion scripts ask
        out.write("".join(f"{word}\n" for word in completions.candidates(parser, words[1:])))
        return errors.OK
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2, already printed)
        return exc.code if isinstance(exc.code, int) else errors.USAGE
    args.prog = prog
    try:
        code: int = args.run(args, out, err, now or clocks.Clock().now)
        return code
    except errors.CliError as exc:
        err.write(f"{prog}: error: {exc.message}\n")
        return exc.code
    except KeyboardInterrupt:
        err.write(f"{prog}: interrupted\n")
        return errors.INTERRUPTED
    except BrokenPipeError:  # `... | head`: the reader left; nothing more to say
        return errors.OK
    except Exception as exc:  # the promise: never a traceback
        err.write(f"{prog}: internal error (please report it): {type(exc).__name__}: {exc}\n")
        return errors.INTERNAL
