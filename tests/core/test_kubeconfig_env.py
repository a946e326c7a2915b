"""The kubeconfig matrix against the real API server: what users' kubeconfigs do end to end.

The control plane accepts the static token of ``env.servers[name].token``
(user in ``system:masters``) and client certificates from ``env.ca``.
"""

from __future__ import annotations

import os
import pathlib

import execkit
import pytest

from clusterhealth_core import retry, settings
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment, pki

ONE_TRY = retry.Backoff(initial=0.01, maximum=0.02, attempts=1)


def _server(env: environment.LocalEnvironment) -> environment.ApiServer:
    return env.servers[environment.CONTROL_PLANE]


def _ca_file(env: environment.LocalEnvironment) -> str:
    return str(env.workdir / "ca.crt")


async def _namespaces(api: kube.ApiClient) -> list[str]:
    return kube.names((await api.list(resources.NAMESPACES))["items"])


async def test_exec_plugin_token_works(env: environment.LocalEnvironment,
                                       tmp_path: pathlib.Path) -> None:
    server = _server(env)
    plugin = execkit.Plugin(tmp_path / "plugin")
    path = execkit.single(tmp_path / "kubeconfig", server.url,
                          cluster={"certificate-authority": _ca_file(env)},
                          user={"exec": plugin.section(tokens=[server.token], expires_in=3600)})
    creds = settings.credentials_from(str(path), None)
    async with kube.ApiClient(creds) as api:
        for _ in range(3):
            assert "default" in await _namespaces(api)
    assert plugin.runs() == 1


async def test_exec_plugin_rerun_after_401(env: environment.LocalEnvironment,
                                           tmp_path: pathlib.Path) -> None:
    """The first token is refused; the client invalidates it, reruns the plugin, retries once.

    Needs the httpx client (401 -> ``TokenSource.invalidate()`` -> one retry).
    """
    server = _server(env)
    plugin = execkit.Plugin(tmp_path / "plugin")
    path = execkit.single(tmp_path / "kubeconfig", server.url,
                          cluster={"certificate-authority": _ca_file(env)},
                          user={"exec": plugin.section(tokens=["wrong-token", server.token])})
    creds = settings.credentials_from(str(path), None)
    async with kube.ApiClient(creds, backoff=ONE_TRY) as api:
        assert "default" in await _namespaces(api)
        assert plugin.runs() == 2
        assert "default" in await _namespaces(api)
    assert plugin.runs() == 2


async def test_exec_plugin_always_refused_is_unauthorized(env: environment.LocalEnvironment,
                                                          tmp_path: pathlib.Path) -> None:
    server = _server(env)
    plugin = execkit.Plugin(tmp_path / "plugin")
    path = execkit.single(tmp_path / "kubeconfig", server.url,
                          cluster={"certificate-authority": _ca_file(env)},
                          user={"exec": plugin.section(tokens=["wrong-token"])})
    async with kube.ApiClient(settings.credentials_from(str(path), None),
                              backoff=ONE_TRY) as api:
        with pytest.raises(errors.Unauthorized):
            await _namespaces(api)


async def test_kubeconfig_list_user_and_cluster_in_different_files(
    env: environment.LocalEnvironment, tmp_path: pathlib.Path
) -> None:
    """KUBECONFIG=users:clusters, relative paths in each resolved against its own file."""
    server = _server(env)
    users_dir, clusters_dir = tmp_path / "users", tmp_path / "clusters"
    (users_dir / "pki").mkdir(parents=True)
    (clusters_dir / "pki").mkdir(parents=True)
    env.ca.client("kubeconfig-tester", "system:masters").write(users_dir / "pki", "tester")
    (clusters_dir / "pki" / "ca.crt").write_bytes(env.ca.cert_pem)
    users = execkit.write_kubeconfig(
        users_dir / "config",
        users={"tester": {"client-certificate": "pki/tester.crt",
                          "client-key": "pki/tester.key"}},
        contexts={"local": {"cluster": "control-plane", "user": "tester",
                            "namespace": "team-a"}},
        current="local",
    )
    clusters = execkit.write_kubeconfig(
        clusters_dir / "config",
        clusters={"control-plane": {"server": server.url,
                                    "certificate-authority": "pki/ca.crt"}},
        current="elsewhere",
    )
    environ = {**os.environ, "KUBECONFIG": f"{users}{os.pathsep}{clusters}"}
    environ.pop("KUBERNETES_SERVICE_HOST", None)
    creds = settings.credentials_from(None, None, environ=environ)
    assert creds.namespace == "team-a"  # the context's namespace is reported
    async with kube.ApiClient(creds) as api:
        assert "default" in await _namespaces(api)
        configmaps = await api.list(resources.CONFIGMAPS, namespace=creds.namespace)
        assert configmaps["items"] == []


async def test_wrong_ca_fails_at_the_first_handshake(env: environment.LocalEnvironment,
                                                     tmp_path: pathlib.Path) -> None:
    """A valid CA of another authority cannot be told wrong at load: the first TLS fails."""
    server = _server(env)
    other = tmp_path / "other-ca.crt"
    other.write_bytes(pki.CertificateAuthority("someone-else").cert_pem)
    path = execkit.single(tmp_path / "kubeconfig", server.url,
                          cluster={"certificate-authority": str(other)},
                          user={"token": server.token})
    creds = settings.credentials_from(str(path), None)  # loads
    async with kube.ApiClient(creds, backoff=ONE_TRY) as api:
        with pytest.raises(errors.Unreachable, match=r"(?i)certificate verify failed"):
            await _namespaces(api)


async def test_ca_that_is_not_pem_fails_at_load(env: environment.LocalEnvironment,
                                                tmp_path: pathlib.Path) -> None:
    server = _server(env)
    bad = tmp_path / "ca.crt"
    bad.write_text("this is not a certificate\n")
    path = execkit.single(tmp_path / "kubeconfig", server.url,
                          cluster={"certificate-authority": str(bad)},
                          user={"token": server.token})
    with pytest.raises(settings.SettingsError,
                       match=r"cluster 'c': certificate-authority is not a PEM certificate"):
        settings.credentials_from(str(path), None)


async def test_impersonation(env: environment.LocalEnvironment, tmp_path: pathlib.Path) -> None:
    """Admin (allowed to impersonate) acting as a user without rights gets 403.

    Needs the httpx client (``Impersonate-User``/``Impersonate-Group`` headers).
    """
    server = _server(env)
    user = {"client-certificate": str(server.directory / "admin.crt"),
            "client-key": str(server.directory / "admin.key")}
    cluster = {"certificate-authority": _ca_file(env)}
    admin = execkit.single(tmp_path / "admin", server.url, cluster=cluster, user=user)
    async with kube.ApiClient(settings.credentials_from(str(admin), None)) as api:
        assert "default" in await _namespaces(api)
    someone = execkit.single(tmp_path / "someone", server.url, cluster=cluster,
                             user={**user, "as": "someone", "as-groups": ["no-rights"]})
    creds = settings.credentials_from(str(someone), None)
    assert (creds.impersonate_user, creds.impersonate_groups) == ("someone", ("no-rights",))
    async with kube.ApiClient(creds, backoff=ONE_TRY) as api:
        with pytest.raises(errors.Forbidden, match='User "someone" cannot list'):
            await _namespaces(api)


async def test_tls_server_name(env: environment.LocalEnvironment, tmp_path: pathlib.Path) -> None:
    """Addressed by IP, the certificate is checked against ``tls-server-name``.

    The serving certificate has SANs 127.0.0.1, localhost and kubernetes: with
    ``tls-server-name: kubernetes`` it works; with a name it lacks the handshake
    fails, which proves the name (not the IP) was checked.  Needs the httpx
    client (``server_hostname`` from ``Credentials.tls_server_name``).
    """
    server = _server(env)

    def kubeconfig(name: str) -> pathlib.Path:
        return execkit.single(tmp_path / name, server.url,
                              cluster={"certificate-authority": _ca_file(env),
                                       "tls-server-name": name},
                              user={"token": server.token})

    creds = settings.credentials_from(str(kubeconfig("kubernetes")), None)
    assert creds.tls_server_name == "kubernetes"
    assert creds.host_is_ip()
    async with kube.ApiClient(creds) as api:
        assert "default" in await _namespaces(api)
    wrong = settings.credentials_from(str(kubeconfig("not-in-the-certificate.invalid")), None)
    async with kube.ApiClient(wrong, backoff=ONE_TRY) as api:
        with pytest.raises(errors.Unreachable, match=r"(?i)certificate verify failed"):
            await _namespaces(api)
