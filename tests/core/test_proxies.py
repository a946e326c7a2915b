"""Which proxy a connection takes: explicit beats environment; the environment as Go reads it."""

from __future__ import annotations

import pytest

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config, errors, proxies

ENV = {"HTTPS_PROXY": "http://proxy.corp:3128", "HTTP_PROXY": "http://plain.corp:3128"}


@pytest.mark.parametrize(("server", "environ", "expected"), [
    ("https://api.corp:6443", ENV, "http://proxy.corp:3128"),
    ("http://api.corp:8080", ENV, "http://plain.corp:3128"),
    ("https://api.corp:6443", {"https_proxy": "proxy.corp:3128"}, "http://proxy.corp:3128"),
    ("https://api.corp:6443", {}, None),
    # kubectl (Go) never proxies loopback or localhost
    ("https://127.0.0.1:6443", ENV, None),
    ("https://127.0.1.3:6443", ENV, None),
    ("https://[::1]:6443", ENV, None),
    ("https://localhost:6443", ENV, None),
    # NO_PROXY: names with their subdomains, leading dot = subdomains, IPs, CIDRs, ports, *
    ("https://api.corp:6443", {**ENV, "NO_PROXY": "corp"}, None),
    ("https://corp:6443", {**ENV, "NO_PROXY": ".corp"}, "http://proxy.corp:3128"),
    ("https://a.corp:6443", {**ENV, "NO_PROXY": ".corp"}, None),
    ("https://a.corp:6443", {**ENV, "NO_PROXY": "*.corp"}, None),
    ("https://notcorp:6443", {**ENV, "NO_PROXY": "corp"}, "http://proxy.corp:3128"),
    ("https://192.168.7.9:6443", {**ENV, "NO_PROXY": "192.168.0.0/16"}, None),
    ("https://192.169.7.9:6443", {**ENV, "NO_PROXY": "192.168.0.0/16"},
     "http://proxy.corp:3128"),
    ("https://192.168.7.9:6443", {**ENV, "NO_PROXY": "192.168.7.9"}, None),
    ("https://api.corp:6443", {**ENV, "NO_PROXY": "api.corp:443"}, "http://proxy.corp:3128"),
    ("https://api.corp:6443", {**ENV, "NO_PROXY": "api.corp:6443"}, None),
    ("https://[fd00::5]:6443", {**ENV, "NO_PROXY": "fd00::/8"}, None),
    ("https://api.corp:6443", {**ENV, "no_proxy": " x.org , *"}, None),
])
def test_environment_proxy(server: str, environ: dict[str, str], expected: str | None) -> None:
    assert proxies.from_environment(server, environ) == expected


def test_an_explicit_proxy_beats_the_environment() -> None:
    credentials = config.Credentials(server="https://127.0.0.1:6443", token="t",
                                     proxy_url="http://127.0.0.1:8888",
                                     proxy_headers=(("Proxy-Authorization", "Basic eDp5"),))
    chosen = kube.proxy_for(credentials, {**ENV, "NO_PROXY": "*"})
    assert chosen is not None
    assert (chosen.url, chosen.headers) == ("http://127.0.0.1:8888",
                                           (("Proxy-Authorization", "Basic eDp5"),))


def test_a_socks_proxy_in_the_environment_is_a_clear_error() -> None:
    credentials = config.Credentials(server="https://api.corp:6443", token="t")
    with pytest.raises(errors.ConfigError, match="SOCKS proxies are not supported"):
        kube.ApiClient(credentials, environ={"HTTPS_PROXY": "socks5://proxy.corp:1080"})
