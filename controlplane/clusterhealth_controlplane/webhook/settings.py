"""The webhook process's flags, validated before anything starts.

Karmada's ``karmada-webhook`` flag names where it has them: ``--secure-port`` (8443),
``--cert-dir`` with ``--tls-cert-file-name`` / ``--tls-private-key-file-name`` (the
files of a mounted ``kubernetes.io/tls`` Secret), and
``--default-not-ready-toleration-seconds`` / ``--default-unreachable-toleration-seconds``
(300; Karmada had them until 1.14). A toleration time is a whole number of seconds
>= 0 (0: evict at once): a negative one is a flag error, and nothing starts. The pair
is loaded now, so a missing or mismatched certificate is exit code 2, not a failed
handshake later. ``--healthz-port`` serves ``/healthz``, ``/readyz`` and ``/metrics``
(plain HTTP unless ``--tls-cert-file`` is given, as for every component): the
serving flags of :mod:`clusterhealth_core.settings`' ``ProcessFlags``, without a
kubeconfig or leader election.  Every flag can also be set as
``CLUSTERHEALTH_WEBHOOK_<FLAG>`` in the environment.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping, Sequence

from clusterhealth_controlplane.webhook import decision
from clusterhealth_core import serving, settings

FLAGS = settings.ProcessFlags(
    prog="clusterhealth-webhook", healthz_port=10361, kube=(),
    description="A mutating admission webhook adding NoExecute tolerations for "
                "cluster.karmada.io/not-ready and cluster.karmada.io/unreachable to every "
                "(Cluster)PropagationPolicy that has none for the key.")
DEFAULT_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"
"""Karmada's (controller-runtime's) default."""
_INT64_MAX = 2**63 - 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class WebhookSettings(settings.ProcessSettings):
    """Everything the webhook needs, already validated; ``tls`` is the health server's."""

    defaults: decision.Defaults
    secure_port: int
    webhook_tls: serving.TLSConfig
    """The admission endpoint's certificate and key (re-read when they change)."""


def toleration_seconds(text: str) -> int:
    """A ``tolerationSeconds``: a whole number >= 0 (an int64, as the API has it)."""
    value = settings.whole_number(text, "a whole number of seconds")
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a toleration time must be >= 0 seconds (0 evicts at once)")
    if value > _INT64_MAX:
        raise argparse.ArgumentTypeError(f"{text!r} is too large (at most {_INT64_MAX})")
    return value


def parser() -> settings.FlagParser:
    """The webhook's command line."""
    return settings.process_parser(FLAGS, _own_flags)


def _own_flags(p: settings.FlagParser) -> None:
    p.add_argument("--default-not-ready-toleration-seconds", type=toleration_seconds,
                   default=300,
                   help="tolerationSeconds of the cluster.karmada.io/not-ready:NoExecute "
                        "toleration added to a policy without one")
    p.add_argument("--default-unreachable-toleration-seconds", type=toleration_seconds,
                   default=300,
                   help="tolerationSeconds of the cluster.karmada.io/unreachable:NoExecute "
                        "toleration added to a policy without one")
    group = p.add_argument_group("admission endpoint")
    group.add_argument("--secure-port", type=settings.port, default=8443,
                       help="port serving the admission reviews over HTTPS")
    group.add_argument("--cert-dir", default=DEFAULT_CERT_DIR,
                       help="directory of the serving certificate and key (a mounted Secret; "
                            "re-read when they change)")
    group.add_argument("--tls-cert-file-name", default="tls.crt",
                       help="the PEM certificate (chain) in --cert-dir")
    group.add_argument("--tls-private-key-file-name", default="tls.key",
                       help="the PEM private key in --cert-dir")


def load(argv: Sequence[str] | None,
         environ: Mapping[str, str] | None = None) -> WebhookSettings:
    """Parse and validate; raise :class:`clusterhealth_core.settings.SettingsError`."""
    args = parser().parse(argv, environ)
    cert = os.path.join(args.cert_dir, args.tls_cert_file_name)
    key = os.path.join(args.cert_dir, args.tls_private_key_file_name)
    try:
        serving.load_tls_context(cert, key)
    except serving.TLSError as exc:
        raise settings.SettingsError(f"--cert-dir: {exc}") from exc
    return settings.read_process(
        WebhookSettings, FLAGS, args, environ,
        defaults=decision.Defaults(
            not_ready_seconds=args.default_not_ready_toleration_seconds,
            unreachable_seconds=args.default_unreachable_toleration_seconds),
        webhook_tls=serving.TLSConfig(cert_file=cert, key_file=key))
