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
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from clusterhealth_cli import errors, explain, live, remedytest, testfile
from clusterhealth_controlplane import options
from clusterhealth_core import clock as clocks
from clusterhealth_core import retry, settings
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config as kubeconfig
from clusterhealth_core.kube import errors as kube_errors

PLUGIN = "kubectl-clusterhealth"
BACKOFF = retry.Backoff(initial=0.2, maximum=1.0, attempts=3)
"""A command should answer within seconds: a few quick retries of transient errors only."""
EXIT_CODES = f"""exit codes:
  {errors.OK}   success (every test passed)
  {errors.TEST_FAILED}   a Remedy test failed
  {errors.USAGE}   bad arguments
  {errors.INPUT}   a file could not be used (not YAML, not a test file, an invalid Remedy)
  {errors.NOT_FOUND}   the Cluster does not exist
  {errors.API}   the control plane could not be used (kubeconfig, unreachable, refused)
  {errors.INTERNAL}  a bug in this command
"""

Now = Callable[[], datetime.datetime]


def prog_name(argv0: str) -> str:
    """``kubectl clusterhealth`` when run as the kubectl plugin, else ``clusterhealth``."""
    return "kubectl clusterhealth" if os.path.basename(argv0) == PLUGIN else "clusterhealth"


def build_parser(prog: str) -> argparse.ArgumentParser:
    """Every command and flag."""
    parser = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Test Remedies before they reach a cluster, and explain what the "
                    "system thinks of a Cluster (docs/cli.md).",
        epilog=EXIT_CODES)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    remedy = commands.add_parser("remedy", help="work with Remedies",
                                 description="Work with Remedies.")
    remedy_commands = remedy.add_subparsers(dest="remedy_command", required=True,
                                            metavar="COMMAND")
    test = remedy_commands.add_parser(
        "test", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="run Remedy test files (fixture Clusters and their expected remedyActions)",
        description="Run Remedy test files: each case's fixture Clusters go through the "
                    "remedy controller's decision code, and the remedyActions (and, when "
                    "given, remedyActionSources) it would write are compared with the "
                    "expected ones. The file format is in docs/cli.md.",
        epilog=EXIT_CODES)
    test.add_argument("files", nargs="+", metavar="FILE", type=pathlib.Path,
                      help="a test file (YAML)")
    test.set_defaults(run=run_remedy_test)

    explain_parser = commands.add_parser("explain", help="explain an object of a live control "
                                                         "plane")
    explain_commands = explain_parser.add_subparsers(dest="explain_command", required=True,
                                                     metavar="KIND")
    cluster = explain_commands.add_parser(
        "cluster", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="a Cluster's conditions and writers, Remedies, taints, evictions and traffic",
        description="Explain one Cluster: its conditions and who wrote them, the Remedies "
                    "covering it and which condition matched, its remedyActions, its taints "
                    "and when the bindings scheduled there are evicted, the "
                    "MultiClusterIngresses blocking its traffic, and the bindings evicted "
                    "from it.",
        epilog=EXIT_CODES)
    cluster.add_argument("name", metavar="NAME", help="the Cluster's name")
    settings.add_kube_flags(cluster, what="the control plane")
    cluster.add_argument("--request-timeout", metavar="DURATION", type=settings.duration,
                         default=10.0,
                         help="give up on one request after this long (default: 10s)")
    cluster.add_argument("-o", "--output", choices=("text", "json"), default="text",
                         help="text for people (default) or json for programs")
    cluster.add_argument(
        "--graceful-eviction-timeout", metavar="DURATION", type=settings.duration,
        default=options.Eviction().graceful_eviction_timeout,
        help="the graceful-eviction controller's --graceful-eviction-timeout, to say when "
             "an eviction task ends at the latest (default: its default, "
             f"{options.Eviction().graceful_eviction_timeout:g}s)")
    cluster.set_defaults(run=run_explain_cluster)
    return parser


# --- commands ---------------------------------------------------------------------------

def run_remedy_test(args: argparse.Namespace, out: TextIO, err: TextIO, now: Now) -> int:
    """Every file's cases; files that cannot be used are reported and skipped."""
    results: list[remedytest.SuiteResult] = []
    broken = 0
    for path in args.files:
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


async def _snapshot(args: argparse.Namespace) -> explain.Snapshot:
    credentials = kubeconfig.load_default(args.kubeconfig, args.context)
    async with kube.ApiClient(credentials, timeout=args.request_timeout, backoff=BACKOFF,
                              user_agent="clusterhealth-cli") as api:
        return await live.snapshot(api, args.name)


def run_explain_cluster(args: argparse.Namespace, out: TextIO, err: TextIO, now: Now) -> int:
    """Read the Cluster and what concerns it, then print the explanation."""
    try:
        found = asyncio.run(_snapshot(args))
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
    moment = now()
    result = explain.build(found, moment, args.graceful_eviction_timeout)
    out.write(explain.to_json(result) if args.output == "json"
              else explain.render_text(result, moment))
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
