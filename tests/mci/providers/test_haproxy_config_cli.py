"""``python -m clusterhealth_mci.providers.haproxy``: the provider's flags -> its haproxy.cfg."""

from __future__ import annotations

import pathlib
import subprocess

from clusterhealth_localenv import haproxy
from clusterhealth_mci.providers.haproxy import __main__ as cli
from clusterhealth_mci.providers.haproxy import config


def test_writes_the_rendered_layout_and_empty_maps(tmp_path: pathlib.Path) -> None:
    maps = tmp_path / "maps"
    out = tmp_path / "cfg" / "haproxy.cfg"
    code = cli.main(["--haproxy-socket", str(tmp_path / "admin.sock"), "--haproxy-slots", "3",
                     "--haproxy-servers-per-slot", "5", "--haproxy-map-dir", str(maps),
                     "--haproxy-bind-address", "127.0.0.1", "--haproxy-bind-port", "18080",
                     "--output", str(out)])
    assert code == 0
    expected = config.HAProxyLayout(bind_address="127.0.0.1", bind_port=18080,
                                    admin_socket=str(tmp_path / "admin.sock"),
                                    map_dir=str(maps), slots=3, servers_per_slot=5)
    assert out.read_text() == config.render(expected)
    assert sorted(p.name for p in maps.iterdir()) == ["exact.map", "prefix.map", "slots.map"]
    assert all(p.read_text() == "" for p in maps.iterdir())


def test_haproxy_starts_with_what_it_wrote(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "haproxy.cfg"
    assert cli.main(["--haproxy-socket", str(tmp_path / "a.sock"), "--haproxy-slots", "2",
                     "--haproxy-servers-per-slot", "2", "--haproxy-map-dir",
                     str(tmp_path / "maps"), "--haproxy-bind-address", "127.0.0.1",
                     "--haproxy-bind-port", str(haproxy.free_port()),
                     "--output", str(out)]) == 0
    with haproxy.HAProxyServer(out.read_text(), tmp_path / "run") as lb:
        assert "mci_slot_1" in lb.query("show backend")


def test_an_impossible_layout_is_one_message_and_exit_2(tmp_path: pathlib.Path,
                                                       python: str,
                                                       python_env: dict[str, str]) -> None:
    result = subprocess.run(
        [python, "-m", "clusterhealth_mci.providers.haproxy", "--haproxy-bind-address",
         "not-an-ip", "--haproxy-map-dir", str(tmp_path / "maps")],
        capture_output=True, text=True, env=python_env, check=False, timeout=60)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("clusterhealth-mci haproxy: "), result.stderr
    assert "not-an-ip" in result.stderr
    assert not (tmp_path / "maps").exists()
