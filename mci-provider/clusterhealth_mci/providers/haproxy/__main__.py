"""``python -m clusterhealth_mci.providers.haproxy``: write the ``haproxy.cfg`` the provider drives.

HAProxy must be started with the layout the provider expects (same slots,
servers per slot, map directory, admin socket and frontend address).  This
command takes the provider's own ``--haproxy-*`` flags, so the same values
given to both cannot disagree: it writes the rendered configuration to
``--output`` (or standard output) and creates the empty map files HAProxy 2.6
needs to start.  ``make demo`` uses it; so can anyone running their own HAProxy.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Sequence

from clusterhealth_core import settings
from clusterhealth_mci.providers.haproxy import config


def _positive(text: str) -> int:
    value = settings.whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def parser() -> argparse.ArgumentParser:
    """The command line: the provider's layout flags, and where to write."""
    p = argparse.ArgumentParser(
        prog="python -m clusterhealth_mci.providers.haproxy",
        description="Write the haproxy.cfg (and empty map files) for the provider's layout flags.")
    d = config.HAProxyLayout()
    p.add_argument("--haproxy-socket", default=d.admin_socket,
                   help="runtime API: a UNIX socket path or HOST:PORT")
    p.add_argument("--haproxy-slots", type=_positive, default=d.slots)
    p.add_argument("--haproxy-servers-per-slot", type=_positive, default=d.servers_per_slot)
    p.add_argument("--haproxy-map-dir", default=d.map_dir)
    p.add_argument("--haproxy-bind-address", default=d.bind_address)
    p.add_argument("--haproxy-bind-port", type=_positive, default=d.bind_port)
    p.add_argument("--output", type=pathlib.Path, default=None,
                   help="file to write (default: standard output)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 after writing, 2 on bad flags or an impossible layout."""
    args = parser().parse_args(argv)
    try:
        layout = config.layout_from(args)
    except ValueError as exc:
        print(f"clusterhealth-mci haproxy: {exc}", file=sys.stderr)
        return 2
    text = config.render(layout)
    config.write_map_files(layout)
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
