"""The aiohttp transport where it differs from httpx's: through a real proxy, with TLS.

The misbehaving-server promises (retries, cut answers, watches) run on both
libraries in ``test_client_http.py`` and ``test_transport.py``; this module
covers a real tinyproxy in front of a real kube-apiserver: ``CONNECT`` with
the proxy's credentials from the kubeconfig's ``proxy-url`` or from Karmada's
``proxyHeader``, TLS to the API server inside the tunnel.
"""

from __future__ import annotations

import dataclasses
import pathlib

import pytest

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment, proxy


async def test_through_a_proxy_with_credentials(env: environment.LocalEnvironment,
                                                tmp_path: pathlib.Path) -> None:
    server = env.servers["member1"]
    credentials = server.credentials()
    with proxy.TinyProxy(tmp_path, basic_auth=("karmada", "s3cret")) as tiny:
        header = tiny.proxy_authorization
        assert header is not None
        refused = dataclasses.replace(credentials, proxy_url=tiny.url)
        async with kube.ApiClient(refused, http="aiohttp", environ={}) as api:
            with pytest.raises(errors.Unreachable):  # 407: the proxy wants credentials
                await api.list(resources.NAMESPACES)
        allowed = dataclasses.replace(credentials, proxy_url=tiny.url,
                                      proxy_headers=(("Proxy-Authorization", header),))
        async with kube.ApiClient(allowed, http="aiohttp", environ={}) as api:
            listed = await api.list(resources.NAMESPACES)
            assert any(i["metadata"]["name"] == "default" for i in listed["items"])
            async for event in api.watch(resources.NAMESPACES, timeout_seconds=1):
                assert event.type in ("ADDED", "BOOKMARK")
        assert f"{server.host}:{server.port}" in tiny.connect_targets()


async def test_an_unknown_library_is_refused(env: environment.LocalEnvironment) -> None:
    with pytest.raises(ValueError, match="unknown HTTP library 'requests'"):
        kube.ApiClient(env.servers["member1"].credentials(), http="requests")  # type: ignore[arg-type]
