"""Command-line settings shared by every component: parsing, validation, env fallback.

Each component declares its flags with :class:`FlagParser` and the groups
here (kube access, leader election, HTTP serving with optional TLS).  The
flags every process has are one base: :class:`ProcessFlags` says which of them
a component has, :func:`process_parser` adds them around the component's own,
and :func:`read_process` reads them back into the component's settings, a
subclass of :class:`ProcessSettings`.  Every flag can also be
set from the environment (``--leader-elect-retry-period`` ↔
``<PREFIX>_LEADER_ELECT_RETRY_PERIOD``).  Parsing never exits the process:
a bad value raises :class:`SettingsError` with one clear message, and the
component's ``main`` prints it and returns exit code 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, TypeVar

from clusterhealth_core import election, events, serving
from clusterhealth_core.kube import config, errors, transport

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


class SettingsError(ValueError):
    """A flag, environment variable or file given to a component is unusable."""


def workers(text: str) -> int:
    """``--workers``: a whole number of concurrent reconciles, 1 to 64."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 64:
        raise argparse.ArgumentTypeError(f"{text!r}: workers must be a whole number 1-64")
    return value


def duration(text: str) -> float:
    """Parse ``500ms``, ``5s``, ``1.5m``, ``1h`` or plain seconds into seconds (> 0)."""
    match = _DURATION.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 500ms, 5s, 1m)")
    seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the duration must be > 0")
    return seconds


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def fraction(text: str) -> float:
    """Parse a number in (0, 1]."""
    value = _number(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be in (0, 1]")
    return value


def rate(text: str) -> float:
    """Parse a rate per second, >= 0 (what 0 means is the flag's to say)."""
    value = _number(text)
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: the rate must be a number >= 0")
    return value


def whole_number(text: str, what: str = "a number") -> int:
    """Parse a whole number; else one message: ``'x' is not <what>``."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None


def port(text: str) -> int:
    """Parse a TCP port (0 picks a free one)."""
    value = whole_number(text, "a port number")
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535)")
    return value


def boolean(text: str) -> bool:
    """Parse true/false (also 1/0, yes/no)."""
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a boolean (true/false)")


class FlagParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that raises :class:`SettingsError` and reads env fallbacks."""

    def __init__(self, *args: Any, env_prefix: str, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.ArgumentDefaultsHelpFormatter)
        super().__init__(*args, **kwargs)
        self.env_prefix = env_prefix
        # handled by runner.main before parsing; listed here for --help
        self.add_argument("--version", action="store_true", help="print the version and exit")

    def error(self, message: str) -> NoReturn:
        """Raise instead of printing usage and exiting."""
        raise SettingsError(message)

    def env_name(self, flag: str) -> str:
        """The environment variable that stands in for ``flag``."""
        return f"{self.env_prefix}_{flag.lstrip('-').replace('-', '_').upper()}"

    def parse(
        self, argv: Sequence[str] | None, environ: Mapping[str, str] | None = None
    ) -> argparse.Namespace:
        """Parse ``argv`` with environment fallbacks; validate every value."""
        environ = os.environ if environ is None else environ
        from_env: list[str] = []
        given = set(argv or [])
        given |= {arg.split("=", 1)[0] for arg in (argv or []) if arg.startswith("--")}
        for action in self._actions:
            flags = [o for o in action.option_strings if o.startswith("--")]
            if not flags or action.dest in ("help", "version") or any(f in given for f in flags):
                continue
            value = environ.get(self.env_name(flags[0]))
            if value is None:
                continue
            if action.nargs == 0:
                if boolean(value):
                    from_env.append(flags[0])
            else:
                from_env.append(f"{flags[0]}={value}")
        return self.parse_args([*from_env, *(argv or [])])


def add_kube_flags(parser: argparse.ArgumentParser, prefix: str = "", what: str = "") -> None:
    """``--<prefix>kubeconfig`` and ``--<prefix>context`` for one API server."""
    target = what or "the API server"
    parser.add_argument(
        f"--{prefix}kubeconfig", default=None,
        help=f"kubeconfig for {target} (default: in a pod its service account, "
             "else $KUBECONFIG, else ~/.kube/config)",
    )
    parser.add_argument(f"--{prefix}context", default=None, help=f"kubeconfig context for {target}")


def credentials_from(
    kubeconfig: str | None,
    context: str | None,
    environ: Mapping[str, str] | None = None,
) -> config.Credentials:
    """Load credentials, turning every kube config problem into a :class:`SettingsError`.

    Without ``kubeconfig``: in a pod (and without ``context``) its service
    account, else ``$KUBECONFIG`` (several files merged as kubectl does), else
    ``~/.kube/config`` -- see :func:`clusterhealth_core.kube.config.load_default`.
    Everything is checked now (TLS material parsed, an ``exec`` plugin's command
    found), so a bad kubeconfig means exit code 2 at start, not a 401 later.
    """
    try:
        return config.load_default(kubeconfig, context, environ=environ)
    except errors.ConfigError as exc:
        raise SettingsError(str(exc)) from exc


def add_leader_election_flags(
    parser: argparse.ArgumentParser, default_name: str, default_namespace: str = "kube-system"
) -> None:
    """Karmada's leader-election flags (defaults 15 s / 10 s / 2 s)."""
    group = parser.add_argument_group("leader election")
    group.add_argument("--leader-elect", type=boolean, default=True,
                       help="elect a leader so that only one replica works")
    group.add_argument("--leader-elect-lease-duration", type=duration, default=15.0,
                       help="how long candidates wait after the last renewal before taking over")
    group.add_argument("--leader-elect-renew-deadline", type=duration, default=10.0,
                       help="the leader stops leading when it could not renew for this long")
    group.add_argument("--leader-elect-retry-period", type=duration, default=2.0,
                       help="pause between attempts to acquire or renew")
    group.add_argument("--leader-elect-resource-name", default=default_name,
                       help="name of the Lease")
    group.add_argument("--leader-elect-resource-namespace", default=default_namespace,
                       help="namespace of the Lease")
    group.add_argument("--leader-elect-identity", default=None,
                       help="this replica's identity (default: <hostname>_<random>)")


def election_config_from(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> election.ElectionConfig:
    """Build and validate the election config from parsed flags.

    An empty Lease namespace means the pod's own (``$POD_NAMESPACE``), else
    ``kube-system``.
    """
    environ = os.environ if environ is None else environ
    if not args.leader_elect_resource_namespace:
        args.leader_elect_resource_namespace = environ.get("POD_NAMESPACE") or "kube-system"
    extra: dict[str, Any] = {}
    if args.leader_elect_identity:
        extra["identity"] = args.leader_elect_identity
    try:
        return election.ElectionConfig(
            lease_name=args.leader_elect_resource_name,
            lease_namespace=args.leader_elect_resource_namespace,
            lease_duration=args.leader_elect_lease_duration,
            renew_deadline=args.leader_elect_renew_deadline,
            retry_period=args.leader_elect_retry_period,
            **extra,
        )
    except ValueError as exc:
        raise SettingsError(str(exc)) from exc


def add_serving_flags(parser: argparse.ArgumentParser, default_port: int) -> None:
    """Where and how ``/metrics``, ``/healthz`` and ``/readyz`` are served."""
    group = parser.add_argument_group("serving")
    group.add_argument(
        "--bind-address", default=serving.EVERY_ADDRESS,
        help="address for the HTTP server; '::' is every IPv6 and IPv4 address "
             "(0.0.0.0 on a host without IPv6); any other address or host name is used as is",
    )
    group.add_argument("--healthz-port", type=port, default=default_port,
                       help="port serving /healthz, /readyz and /metrics")
    group.add_argument("--tls-cert-file", default=None,
                       help="serve HTTPS with this PEM certificate (chain); re-read when it "
                            "changes; needs --tls-private-key-file")
    group.add_argument("--tls-private-key-file", default=None,
                       help="the PEM private key of --tls-cert-file")


def tls_config_from(args: argparse.Namespace) -> serving.TLSConfig | None:
    """The serving TLS settings, checked now: both files or neither, readable, matching."""
    cert, key = args.tls_cert_file or None, args.tls_private_key_file or None
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        missing = "--tls-cert-file" if cert is None else "--tls-private-key-file"
        raise SettingsError(f"--tls-cert-file and --tls-private-key-file go together: "
                            f"{missing} is missing")
    try:
        serving.load_tls_context(cert, key)
    except serving.TLSError as exc:
        raise SettingsError(str(exc)) from exc
    return serving.TLSConfig(cert_file=cert, key_file=key)


CONTROL_PLANE = ("", "the control plane")
"""``--kubeconfig`` and ``--context`` for the control plane: most components' one API server."""


@dataclasses.dataclass(frozen=True)
class ProcessFlags:
    """Which of the shared process flags a component has, and their defaults.

    :func:`process_parser` adds them around the component's own flags, in the
    order ``--help`` lists them: the kubeconfig pairs, the component's own,
    ``--http-library`` and ``--event-namespace``, then the serving and the
    leader-election groups.
    """

    prog: str
    description: str
    healthz_port: int
    """``--healthz-port``'s default."""
    lease: str | None = None
    """``--leader-elect-resource-name``'s default; ``None``: the process elects no leader."""
    kube: tuple[tuple[str, str], ...] = (CONTROL_PLANE,)
    """``(prefix, what)`` of each kubeconfig pair; the first is read as
    :attr:`ProcessSettings.credentials`, the others by the component."""
    http_library: str | None = None
    """``--http-library``'s help (default aiohttp); ``None``: no such flag, httpx."""
    event_namespace: str | None = None
    """``--event-namespace``'s help; ``None``: no such flag, Events go to ``default``."""

    @property
    def env_prefix(self) -> str:
        """The start of the environment variables for flags: ``CLUSTERHEALTH_AGENT``."""
        return self.prog.upper().replace("-", "_")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProcessSettings:
    """The settings every component's process has; each component's settings extend it."""

    credentials: config.Credentials | None
    """The API server of the first kubeconfig pair (``None``: the process has none)."""
    bind_address: str
    healthz_port: int
    tls: serving.TLSConfig | None
    leader_elect: bool
    election: election.ElectionConfig | None
    """``None``: the process elects no leader."""
    http_library: transport.Library
    event_namespace: str


def process_parser(flags: ProcessFlags, own: Callable[[FlagParser], None]) -> FlagParser:
    """A component's command line: the common flags of ``flags`` around ``own``'s."""
    parser = FlagParser(prog=flags.prog, env_prefix=flags.env_prefix,
                        description=flags.description)
    for prefix, what in flags.kube:
        add_kube_flags(parser, prefix, what)
    own(parser)
    if flags.http_library is not None:
        parser.add_argument("--http-library", choices=transport.LIBRARIES, default="aiohttp",
                            help=flags.http_library)
    if flags.event_namespace is not None:
        parser.add_argument("--event-namespace", default="default", help=flags.event_namespace)
    add_serving_flags(parser, flags.healthz_port)
    if flags.lease is not None:
        add_leader_election_flags(parser, flags.lease, "")
    return parser


Settings = TypeVar("Settings", bound=ProcessSettings)


def read_process(kind: type[Settings], flags: ProcessFlags, args: argparse.Namespace,
                 environ: Mapping[str, str] | None = None, **own: Any) -> Settings:
    """``kind`` made of the common settings read back from ``args`` and the component's ``own``.

    A field of ``kind`` that ``own`` does not give is the flag of its name
    (``resync_period`` is ``--resync-period``).  Checks in this order, each a
    :class:`SettingsError`: the Event namespace, the kubeconfig, the serving
    TLS pair, the leader-election timings.
    """
    namespace = "default"
    if flags.event_namespace is not None:
        namespace = args.event_namespace
        try:
            events.check_namespace(namespace)
        except ValueError as exc:
            raise SettingsError(f"--event-namespace: {exc}") from exc
    credentials = None
    if flags.kube:
        prefix = flags.kube[0][0].replace("-", "_")
        credentials = credentials_from(getattr(args, f"{prefix}kubeconfig"),
                                       getattr(args, f"{prefix}context"))
    common = {field.name for field in dataclasses.fields(ProcessSettings)}
    for field in dataclasses.fields(kind):
        if field.name not in common and field.name not in own and hasattr(args, field.name):
            own[field.name] = getattr(args, field.name)
    return kind(
        credentials=credentials,
        bind_address=args.bind_address,
        healthz_port=args.healthz_port,
        tls=tls_config_from(args),
        leader_elect=flags.lease is not None and args.leader_elect,
        election=election_config_from(args, environ) if flags.lease is not None else None,
        http_library=args.http_library if flags.http_library is not None else "httpx",
        event_namespace=namespace,
        **own,
    )
