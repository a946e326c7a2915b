"""Exec credential plugins: a real plugin script, run as a subprocess, counted and expired.

Wall time for the token's expiry is a :class:`~clusterhealth_core.clock.ManualClock`
moved by the test (the plugin computes its ``expirationTimestamp`` from real
time, so the manual clock starts at real now); the plugin runs for real.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import os
import pathlib
import sys

import execkit
import pytest

import testkit
from clusterhealth_core import clock as clocks
from clusterhealth_core.kube import config, errors, execplugin

SERVER = "https://127.0.0.1:6443"


@pytest.fixture
def plugin(tmp_path: pathlib.Path) -> execkit.Plugin:
    return execkit.Plugin(tmp_path / "plugin")


@pytest.fixture
def clock() -> clocks.ManualClock:
    return clocks.ManualClock(datetime.datetime.now(datetime.UTC))


def load(tmp_path: pathlib.Path, section: dict[str, object]) -> config.Credentials:
    return config.load_kubeconfig(
        execkit.single(tmp_path / "kubeconfig", SERVER, user={"exec": section}))


async def test_token_cached_until_expiry(tmp_path: pathlib.Path, plugin: execkit.Plugin,
                                         clock: clocks.ManualClock) -> None:
    creds = load(tmp_path, plugin.section(expires_in=300))
    source = config.TokenSource(creds, clock=clock)
    assert plugin.runs() == 0  # loading never runs the plugin
    assert source.refreshable
    tokens = await asyncio.gather(*(source.token() for _ in range(20)))
    assert set(tokens) == {"token-1"}
    for _ in range(5):
        assert await source.token() == "token-1"
    assert plugin.runs() == 1
    # Renewed 10 s (at most 10 % of its life) before it expires.  The plugin rounds
    # its expiry down to the second and runs a little after the clock's start:
    # the checks keep seconds of margin on both sides.
    clock.advance(285)
    assert await source.token() == "token-1"
    clock.advance(10)  # 5 s before expiry
    assert await source.token() == "token-2"
    assert plugin.runs() == 2


async def test_short_lived_token_is_renewed_within_its_life(
    tmp_path: pathlib.Path, plugin: execkit.Plugin, clock: clocks.ManualClock
) -> None:
    creds = load(tmp_path, plugin.section(expires_in=60))  # skew: 10 % of 60 s = 6 s
    source = config.TokenSource(creds, clock=clock)
    assert await source.token() == "token-1"
    clock.advance(52)  # a 10 s skew would have renewed it by now
    assert await source.token() == "token-1"
    clock.advance(6)  # 2 s before expiry
    assert await source.token() == "token-2"


async def test_without_expiry_cached_until_invalidated(
    tmp_path: pathlib.Path, plugin: execkit.Plugin, clock: clocks.ManualClock
) -> None:
    source = config.TokenSource(load(tmp_path, plugin.section()), clock=clock)
    assert await source.token() == "token-1"
    clock.advance(86400)
    assert await source.token() == "token-1"
    assert plugin.runs() == 1
    source.invalidate()  # what the client does on a 401
    assert await source.token() == "token-2"
    assert plugin.runs() == 2
    # A 401 for a token that was already replaced costs no run...
    source.invalidate("token-1")
    assert await source.token() == "token-2"
    assert plugin.runs() == 2
    # ... one for the current token does.
    source.invalidate("token-2")
    assert await source.token() == "token-3"
    assert plugin.runs() == 3


async def test_concurrent_callers_share_one_run(tmp_path: pathlib.Path,
                                                plugin: execkit.Plugin) -> None:
    source = config.TokenSource(load(tmp_path, plugin.section(delay=0.3)))
    first = await asyncio.gather(*(source.token() for _ in range(10)))
    assert first == ["token-1"] * 10
    source.invalidate()
    second = await asyncio.gather(*(source.token() for _ in range(10)))
    assert second == ["token-2"] * 10
    assert plugin.runs() == 2


async def test_a_cancelled_caller_leaves_the_run_to_the_others(
    tmp_path: pathlib.Path, plugin: execkit.Plugin
) -> None:
    source = config.TokenSource(load(tmp_path, plugin.section(delay=0.5)))
    impatient = asyncio.create_task(source.token())
    patient = asyncio.create_task(source.token())
    await testkit.eventually(plugin.runs, 10, "the plugin runs", interval=0.01)
    impatient.cancel()
    with pytest.raises(asyncio.CancelledError):
        await impatient
    assert await patient == "token-1"
    assert await source.token() == "token-1"
    assert plugin.runs() == 1


@pytest.mark.parametrize("api_version", [execplugin.V1, execplugin.V1BETA1])
async def test_v1_and_v1beta1(tmp_path: pathlib.Path, plugin: execkit.Plugin,
                              api_version: str) -> None:
    section = plugin.section(api_version=api_version, tokens=["abc"])
    assert ("interactiveMode" in section) == (api_version == execplugin.V1)
    source = config.TokenSource(load(tmp_path, section))
    assert await source.token() == "abc"
    assert plugin.exec_info(1) == {"apiVersion": api_version, "kind": "ExecCredential",
                                   "spec": {"interactive": False}}


async def test_answer_in_the_other_version_is_refused(tmp_path: pathlib.Path,
                                                      plugin: execkit.Plugin) -> None:
    section = plugin.section(env={"PLUGIN_ANSWER_VERSION": execplugin.V1BETA1})
    source = config.TokenSource(load(tmp_path, section))
    with pytest.raises(errors.ConfigError,
                       match=r"answered apiVersion 'client\.authentication\.k8s\.io/v1beta1', "
                             r"but the kubeconfig asks for 'client\.authentication\.k8s\.io/v1'"):
        await source.token()


async def test_args_env_and_cluster_info(tmp_path: pathlib.Path, plugin: execkit.Plugin) -> None:
    section = plugin.section(env={"OVERRIDDEN": "by-kubeconfig"}, args=["eks", "get-token"],
                             provideClusterInfo=True)
    creds = config.load_kubeconfig(execkit.single(
        tmp_path / "kubeconfig", SERVER, cluster={"tls-server-name": "kubernetes"},
        user={"exec": section}))
    parent = {"FROM_PARENT": "yes", "OVERRIDDEN": "by-parent"}
    source = config.TokenSource(creds, environ=parent)
    assert await source.token() == "token-1"
    record = plugin.record(1)
    assert record["argv"] == ["eks", "get-token"]
    assert record["env"]["FROM_PARENT"] == "yes"
    assert record["env"]["OVERRIDDEN"] == "by-kubeconfig"
    assert plugin.exec_info(1)["spec"] == {
        "interactive": False,
        "cluster": {"server": SERVER, "tls-server-name": "kubernetes"},
    }


async def test_relative_command_runs_from_anywhere(tmp_path: pathlib.Path,
                                                   plugin: execkit.Plugin,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # The kubeconfig sits next to the plugin's directory; the process runs elsewhere.
    section = plugin.section(command="plugin/get-token")
    creds = load(tmp_path, section)
    monkeypatch.chdir("/")
    assert await config.TokenSource(creds).token() == "token-1"


async def test_plugin_stderr_goes_to_the_log(tmp_path: pathlib.Path, plugin: execkit.Plugin,
                                             caplog: pytest.LogCaptureFixture) -> None:
    source = config.TokenSource(load(tmp_path, plugin.section()))
    with caplog.at_level(logging.INFO, logger=execplugin.__name__):
        await source.token()
    assert any("get-token: plugin run 1" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("fail", r"get-token exited with code 3; its stderr ends with:\nplugin run 1\n"
                 r"error: getting credentials: AccessDenied"),
        ("garbage", r"get-token printed something that is not an ExecCredential in JSON"),
        ("no-status", r"get-token returned no status"),
        ("empty-token", r"get-token returned no status\.token"),
        ("cert-only", r"returned a client certificate instead of a token: client certificates "
                      r"from exec plugins are not supported"),
    ],
)
async def test_failures_are_clear_errors_at_first_use(
    tmp_path: pathlib.Path, plugin: execkit.Plugin, mode: str, message: str
) -> None:
    source = config.TokenSource(load(tmp_path, plugin.section(mode=mode)))  # loads fine
    with pytest.raises(execplugin.ExecPluginError, match=message) as caught:
        await source.token()
    assert isinstance(caught.value, errors.ConfigError)
    assert f"kubeconfig {tmp_path / 'kubeconfig'}, context 'dev', user 'u': exec" in str(
        caught.value)
    # A failure is not cached: the next request tries again.
    with pytest.raises(execplugin.ExecPluginError):
        await source.token()
    assert plugin.runs() == 2


async def test_a_plugin_that_hangs_is_killed(tmp_path: pathlib.Path,
                                             plugin: execkit.Plugin) -> None:
    creds = load(tmp_path, plugin.section(delay=60))
    assert creds.exec_plugin is not None
    # 2 s: long enough for the plugin (a Python program) to start and say its pid on a
    # loaded machine, where 0.5 s was not
    creds = dataclasses.replace(creds, exec_plugin=dataclasses.replace(creds.exec_plugin,
                                                                       timeout=2.0))
    source = config.TokenSource(creds)
    with pytest.raises(execplugin.ExecPluginError, match=r"did not finish within 2s"):
        await source.token()
    [pid] = plugin.pids()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_command_gone_after_load(tmp_path: pathlib.Path, plugin: execkit.Plugin) -> None:
    source = config.TokenSource(load(tmp_path, plugin.section(
        installHint="Install the plugin: see https://example.invalid/get-token")))
    plugin.path.unlink()
    with pytest.raises(execplugin.ExecPluginError,
                       match=r"cannot run .*get-token: No such file or directory\n"
                             r"Install the plugin: see https://example\.invalid/get-token"):
        await source.token()


async def test_an_already_expired_token_is_used_once(
    tmp_path: pathlib.Path, plugin: execkit.Plugin, caplog: pytest.LogCaptureFixture
) -> None:
    source = config.TokenSource(load(tmp_path, plugin.section(expires_in=-60)))
    with caplog.at_level(logging.WARNING, logger=execplugin.__name__):
        assert await source.token() == "token-1"
    assert "returned a token that expired" in caplog.text
    assert await source.token() == "token-2"


def test_plugin_script_is_executable_python(plugin: execkit.Plugin) -> None:
    assert plugin.path.read_text().startswith(f"#!{sys.executable}\n")
    assert os.access(plugin.path, os.X_OK)
