"""Flags, environment fallbacks and start-up errors give one clear message."""

from __future__ import annotations

import argparse
import pathlib

import pytest

from clusterhealth_core import retry, settings
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config, errors


def _parser() -> settings.FlagParser:
    parser = settings.FlagParser(prog="test", env_prefix="CH")
    settings.add_kube_flags(parser)
    settings.add_leader_election_flags(parser, "test-lease")
    settings.add_serving_flags(parser, 10358)
    parser.add_argument("--detect-period", type=settings.duration, default=5.0)
    parser.add_argument("--failure-quorum", type=settings.fraction, default=1.0)
    return parser


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5s", 5.0), ("500ms", 0.5), ("1.5m", 90.0), ("2", 2.0), ("1h", 3600.0)],
)
def test_durations(text: str, seconds: float) -> None:
    assert settings.duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--detect-period", "soon"], "not a duration"),
        (["--detect-period", "0s"], "must be > 0"),
        (["--failure-quorum", "1.5"], r"must be in \(0, 1\]"),
        (["--healthz-port", "70000"], "not a port"),
        (["--leader-elect", "maybe"], "not a boolean"),
        (["--no-such-flag"], "unrecognized arguments"),
    ],
)
def test_bad_flags_raise_one_clear_error(argv: list[str], message: str) -> None:
    with pytest.raises(settings.SettingsError, match=message):
        _parser().parse(argv, environ={})


def test_environment_fallback_and_flag_precedence() -> None:
    env = {"CH_DETECT_PERIOD": "2s", "CH_LEADER_ELECT": "false", "CH_HEALTHZ_PORT": "9000"}
    args = _parser().parse(["--healthz-port", "9100"], environ=env)
    assert args.detect_period == 2.0
    assert args.leader_elect is False
    assert args.healthz_port == 9100


def test_bad_environment_value_names_the_flag() -> None:
    with pytest.raises(settings.SettingsError, match="detect-period"):
        _parser().parse([], environ={"CH_DETECT_PERIOD": "never"})


def test_inconsistent_election_timings() -> None:
    args = _parser().parse(["--leader-elect-renew-deadline", "20s"], environ={})
    with pytest.raises(settings.SettingsError, match="lease duration"):
        settings.election_config_from(args)


def test_unreadable_kubeconfig(tmp_path: pathlib.Path) -> None:
    with pytest.raises(settings.SettingsError, match="cannot read kubeconfig"):
        settings.credentials_from(str(tmp_path / "missing"), None)
    bad = tmp_path / "bad"
    bad.write_text("clusters: [")
    with pytest.raises(settings.SettingsError, match="not valid YAML"):
        settings.credentials_from(str(bad), None)
    empty_ctx = tmp_path / "noctx"
    empty_ctx.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    with pytest.raises(settings.SettingsError, match="no context"):
        settings.credentials_from(str(empty_ctx), None)


def test_not_in_cluster_without_kubeconfig(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: pathlib.Path) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config either
    with pytest.raises(settings.SettingsError, match="KUBERNETES_SERVICE_HOST"):
        settings.credentials_from(None, None)


async def test_unreachable_server_is_one_clear_error() -> None:
    creds = config.Credentials(server="https://127.0.0.1:1", insecure_skip_tls_verify=True)
    fast = retry.Backoff(initial=0.01, maximum=0.02, attempts=2)
    async with kube.ApiClient(creds, backoff=fast) as api:
        with pytest.raises(errors.Unreachable, match=r"127\.0\.0\.1:1 unreachable"):
            await api.request("GET", "/version")



@pytest.mark.parametrize(("text", "expected"), [("1", 1), ("8", 8), ("64", 64)])
def test_workers_accepts_1_to_64(text: str, expected: int) -> None:
    assert settings.workers(text) == expected


@pytest.mark.parametrize("text", ["0", "65", "-1", "two", "1.5", ""])
def test_workers_refuses_anything_else(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="workers must be a whole number 1-64"):
        settings.workers(text)
