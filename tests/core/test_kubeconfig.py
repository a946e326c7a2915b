"""Kubeconfig loading: every field users' kubeconfigs carry, kubectl's merge order, one clear error.

Unit table on files written by the test (real certificates from the local
PKI); the same kubeconfigs against the real API server are in
``test_kubeconfig_env.py``.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from typing import Any

import execkit
import pytest

from clusterhealth_core import settings
from clusterhealth_core.kube import config, errors, execplugin
from clusterhealth_localenv import pki

SERVER = "https://127.0.0.1:6443"


@dataclasses.dataclass(frozen=True)
class Pem:
    ca: bytes
    cert: bytes
    key: bytes
    other_key: bytes
    other_ca: bytes


@pytest.fixture(scope="module")
def pem() -> Pem:
    ca = pki.CertificateAuthority()
    pair = ca.client("alice", "dev")
    other = ca.client("bob")
    return Pem(ca.cert_pem, pair.cert_pem, pair.key_pem, other.key_pem,
               pki.CertificateAuthority("another-ca").cert_pem)


def b64(data: bytes, wrap: int | None = None) -> str:
    text = base64.b64encode(data).decode()
    if wrap:
        text = "\n".join(text[i:i + wrap] for i in range(0, len(text), wrap))
    return text


def simple(path: pathlib.Path, cluster: Mapping[str, Any] | None = None,
           user: Mapping[str, Any] | None = None,
           context: Mapping[str, Any] | None = None) -> pathlib.Path:
    return execkit.single(path, SERVER, cluster, user, context)


write_kubeconfig = execkit.write_kubeconfig


# --- fields ----------------------------------------------------------------------


def test_every_field_is_read(tmp_path: pathlib.Path, pem: Pem) -> None:
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "ca.crt").write_bytes(pem.ca)
    (tmp_path / "certs" / "tls.crt").write_bytes(pem.cert)
    (tmp_path / "certs" / "tls.key").write_bytes(pem.key)
    path = simple(
        tmp_path / "config",
        cluster={"certificate-authority": "certs/ca.crt", "tls-server-name": "kubernetes",
                 "proxy-url": "http://127.0.0.1:3128"},
        user={"client-certificate": "certs/tls.crt", "client-key": "certs/tls.key",
              "token": "t0ken", "as": "someone", "as-groups": ["viewers", "auditors"]},
        context={"namespace": "team-a"},
    )
    creds = config.load_kubeconfig(path)
    assert creds.server == SERVER
    assert creds.ca_data == pem.ca
    assert (creds.client_cert_data, creds.client_key_data) == (pem.cert, pem.key)
    assert creds.token == "t0ken"
    assert creds.tls_server_name == "kubernetes"
    assert creds.proxy_url == "http://127.0.0.1:3128"
    assert creds.impersonate_user == "someone"
    assert creds.impersonate_groups == ("viewers", "auditors")
    assert creds.namespace == "team-a"
    assert creds.exec_plugin is None
    assert creds.source == f"{path} (context dev)"


def test_wrapped_base64_data_fields(tmp_path: pathlib.Path, pem: Pem) -> None:
    path = simple(
        tmp_path / "config",
        cluster={"certificate-authority-data": b64(pem.ca, wrap=64)},
        user={"client-certificate-data": "  " + b64(pem.cert, wrap=76) + "\n",
              "client-key-data": b64(pem.key, wrap=60).replace("\n", " \n\t")},
    )
    creds = config.load_kubeconfig(path)
    assert (creds.ca_data, creds.client_cert_data, creds.client_key_data) == (
        pem.ca, pem.cert, pem.key)


def test_block_scalar_base64(tmp_path: pathlib.Path, pem: Pem) -> None:
    wrapped = textwrap.indent(b64(pem.ca, wrap=64), "      ")
    path = tmp_path / "config"
    path.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
        f"    server: {SERVER}\n    certificate-authority-data: |\n{wrapped}\n"
        "contexts:\n- name: dev\n  context: {cluster: c}\ncurrent-context: dev\n"
    )
    creds = config.load_kubeconfig(path)
    assert creds.ca_data == pem.ca
    assert creds.token is None  # a context without a user: anonymous


def test_data_wins_over_file_and_token_file_is_relative(tmp_path: pathlib.Path,
                                                        pem: Pem) -> None:
    (tmp_path / "token").write_text("from-file\n")
    path = simple(tmp_path / "config",
                  cluster={"certificate-authority-data": b64(pem.ca),
                           "certificate-authority": "missing.crt"},
                  user={"tokenFile": "token"})
    creds = config.load_kubeconfig(path)
    assert creds.ca_data == pem.ca
    assert creds.token_file == tmp_path / "token"


async def test_token_file_is_served(tmp_path: pathlib.Path) -> None:
    (tmp_path / "token").write_text("from-file\n")
    creds = config.load_kubeconfig(simple(tmp_path / "config", user={"tokenFile": "token"}))
    source = config.TokenSource(creds)
    assert source.refreshable
    assert await source.token() == "from-file"


def test_named_context_and_listing_of_known_ones(tmp_path: pathlib.Path) -> None:
    path = write_kubeconfig(
        tmp_path / "config",
        clusters={"a": {"server": "https://127.0.0.1:1001"},
                  "b": {"server": "https://127.0.0.1:1002"}},
        users={"u": {"token": "x"}},
        contexts={"one": {"cluster": "a", "user": "u"}, "two": {"cluster": "b", "user": "u"}},
        current="one",
    )
    assert config.load_kubeconfig(path).server == "https://127.0.0.1:1001"
    assert config.load_kubeconfig(path, "two").server == "https://127.0.0.1:1002"
    with pytest.raises(errors.ConfigError,
                       match=r"no context named 'three' \(contexts: one, two\)"):
        config.load_kubeconfig(path, "three")


def test_exec_cluster_info_and_extension(tmp_path: pathlib.Path, pem: Pem) -> None:
    path = write_kubeconfig(
        tmp_path / "config",
        clusters={"c": {
            "server": SERVER, "certificate-authority-data": b64(pem.ca),
            "tls-server-name": "kubernetes",
            "extensions": [{"name": "client.authentication.k8s.io/exec",
                            "extension": {"audience": "06e3fbd18de8"}}],
        }},
        users={"u": {"exec": {"apiVersion": execplugin.V1, "command": sys.executable,
                              "args": ["-c", "pass"], "interactiveMode": "Never",
                              "provideClusterInfo": True,
                              "env": [{"name": "A", "value": "1"}]}}},
        contexts={"dev": {"cluster": "c", "user": "u"}},
        current="dev",
    )
    plugin = config.load_kubeconfig(path).exec_plugin
    assert plugin is not None
    assert plugin.path == sys.executable
    assert plugin.args == ("-c", "pass")
    assert plugin.env == (("A", "1"),)
    info = json.loads(plugin.exec_info())
    assert info == {
        "apiVersion": execplugin.V1, "kind": "ExecCredential",
        "spec": {"interactive": False, "cluster": {
            "server": SERVER, "tls-server-name": "kubernetes",
            "certificate-authority-data": b64(pem.ca),
            "config": {"audience": "06e3fbd18de8"}}},
    }


def test_exec_without_cluster_info(tmp_path: pathlib.Path) -> None:
    path = simple(tmp_path / "config", user={"exec": {
        "apiVersion": execplugin.V1BETA1, "command": sys.executable}})
    plugin = config.load_kubeconfig(path).exec_plugin
    assert plugin is not None
    assert plugin.interactive_mode == "IfAvailable"  # v1beta1's default; never interactive here
    assert json.loads(plugin.exec_info()) == {
        "apiVersion": execplugin.V1BETA1, "kind": "ExecCredential",
        "spec": {"interactive": False}}


def test_exec_command_resolution(tmp_path: pathlib.Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "get-token"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    exec_ = {"apiVersion": execplugin.V1, "interactiveMode": "Never"}
    # A relative path with a slash: against the kubeconfig's directory, not the cwd.
    path = simple(tmp_path / "config", user={"exec": {**exec_, "command": "bin/get-token"}})
    plugin = config.load_kubeconfig(path).exec_plugin
    assert plugin is not None and plugin.path == str(tool)
    # A bare name: on PATH.
    path = simple(tmp_path / "config2", user={"exec": {**exec_, "command": "get-token"}})
    search = f"/nonexistent{os.pathsep}{bindir}"
    plugin = config.load_kubeconfig(path, search_path=search).exec_plugin
    assert plugin is not None and plugin.path == str(tool)
    with pytest.raises(errors.ConfigError, match="'get-token' not found on PATH"):
        config.load_kubeconfig(path, search_path="/nonexistent")


# --- merging -----------------------------------------------------------------------


def test_kubeconfig_list_merges_like_kubectl(tmp_path: pathlib.Path, pem: Pem) -> None:
    first = write_kubeconfig(
        tmp_path / "a" / "config",
        users={"alice": {"token": "from-first"}},
        contexts={"dev": {"cluster": "shared", "user": "alice", "namespace": "first-ns"}},
        current="dev",
    )
    (tmp_path / "b" / "pki").mkdir(parents=True)
    (tmp_path / "b" / "pki" / "ca.crt").write_bytes(pem.ca)
    second = write_kubeconfig(
        tmp_path / "b" / "config",
        clusters={"shared": {"server": SERVER, "certificate-authority": "pki/ca.crt"}},
        users={"alice": {"token": "from-second"}},
        contexts={"dev": {"cluster": "shared", "user": "alice", "namespace": "second-ns"},
                  "other": {"cluster": "shared", "user": "alice"}},
        current="other",
    )
    creds = config.load_kubeconfig([first, tmp_path / "missing", second])
    assert creds.token == "from-first"  # the first file naming a user wins
    assert creds.namespace == "first-ns"  # ... and a context, and current-context
    assert creds.ca_data == pem.ca  # relative to the file the cluster came from
    assert creds.source.startswith("KUBECONFIG ")
    # Reversed, the second file wins everything it names.
    creds = config.load_kubeconfig([second, first])
    assert creds.token == "from-second"
    assert creds.namespace is None  # context 'other'


def test_kubeconfig_list_with_no_existing_file(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.ConfigError, match="none of the kubeconfig files exist"):
        config.load_kubeconfig([tmp_path / "x", tmp_path / "y"])


def test_empty_file_in_a_list_is_skipped(tmp_path: pathlib.Path) -> None:
    (tmp_path / "empty").write_text("")
    creds = config.load_kubeconfig([tmp_path / "empty", simple(tmp_path / "config")])
    assert creds.token == "t0ken"


def test_context_from_another_file_than_the_cluster(tmp_path: pathlib.Path) -> None:
    users = write_kubeconfig(tmp_path / "users.yaml", users={"u": {"token": "t"}},
                             contexts={"dev": {"cluster": "c", "user": "u"}})
    clusters = write_kubeconfig(tmp_path / "clusters.yaml", clusters={"c": {"server": SERVER}},
                                current="dev")
    creds = config.load_kubeconfig([users, clusters])
    assert (creds.server, creds.token) == (SERVER, "t")


# --- default loading rules -----------------------------------------------------------


def _service_account(directory: pathlib.Path, pem: Pem) -> pathlib.Path:
    directory.mkdir()
    (directory / "token").write_text("sa-token")
    (directory / "ca.crt").write_bytes(pem.ca)
    (directory / "namespace").write_text("clusterhealth-system")
    return directory


def test_loading_rules(tmp_path: pathlib.Path, pem: Pem) -> None:
    sa = _service_account(tmp_path / "sa", pem)
    home = tmp_path / "home"
    home_config = simple(home / ".kube" / "config", user={"token": "home"})
    listed = simple(tmp_path / "listed", user={"token": "listed"})
    flag = simple(tmp_path / "flag", user={"token": "flag"})
    pod = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}

    def load(kubeconfig: pathlib.Path | None, context: str | None = None,
             **environ: str) -> config.Credentials:
        return config.load_default(kubeconfig, context, environ=environ, home=home, sa_dir=sa)

    # 1. the flag, even in a pod and with KUBECONFIG set
    assert load(flag, **pod, KUBECONFIG=str(listed)).token == "flag"
    # 2. in a pod: the service account (KUBECONFIG is not looked at)
    in_pod = load(None, **pod, KUBECONFIG=str(listed))
    assert in_pod.server == "https://10.96.0.1:443"
    assert in_pod.token_file == sa / "token"
    assert in_pod.namespace == "clusterhealth-system"
    # ... unless a context is asked for: that names a kubeconfig entry
    assert load(None, "dev", **pod, KUBECONFIG=str(listed)).token == "listed"
    # 3. KUBECONFIG (several files, os.pathsep)
    assert load(None, KUBECONFIG=f"{tmp_path / 'nope'}{os.pathsep}{listed}").token == "listed"
    # 4. ~/.kube/config
    assert load(None).token == "home"
    home_config.unlink()
    with pytest.raises(errors.ConfigError, match=r"KUBERNETES_SERVICE_HOST unset.*\.kube/config"):
        load(None)
    with pytest.raises(errors.ConfigError, match=r"\$KUBECONFIG .* names no existing file"):
        load(None, KUBECONFIG=str(tmp_path / "nope"))


def test_home_comes_from_the_environment(tmp_path: pathlib.Path) -> None:
    simple(tmp_path / ".kube" / "config", user={"token": "home"})
    creds = settings.credentials_from(None, None, environ={"HOME": str(tmp_path)})
    assert creds.token == "home"
    assert config.kubeconfig_paths({"KUBECONFIG": f"a{os.pathsep}{os.pathsep}b"}) == [
        pathlib.Path("a"), pathlib.Path("b")]


# --- one clear error at load -----------------------------------------------------------

EXEC_V1 = {"apiVersion": execplugin.V1, "command": sys.executable, "interactiveMode": "Never"}


Case = tuple[dict[str, Any], dict[str, Any], str]


def _errors_table(pem: Pem) -> dict[str, Case]:
    """id -> (cluster fields, user fields, the message expected after 'kubeconfig, context')."""
    cert, key, ca = b64(pem.cert), b64(pem.key), b64(pem.ca)
    bad_pem = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    hint = "Install it with: brew install no-such"
    return {
        # unsupported authentication
        "auth-provider-gcp": (
            {}, {"auth-provider": {"name": "gcp", "config": {}}},
            r"user 'u': auth-provider 'gcp' is not supported.*gke-gcloud-auth-plugin"),
        "auth-provider-oidc": (
            {}, {"auth-provider": {"name": "oidc"}},
            r"auth-provider 'oidc' is not supported.*kubelogin"),
        "auth-provider-azure": (
            {}, {"auth-provider": {"name": "azure"}},
            r"auth-provider 'azure' is not supported.*convert-kubeconfig"),
        "basic-auth": (
            {}, {"username": "admin", "password": "secret"},
            r"user 'u': username/password \(basic auth\) is not supported"),
        "as-uid": ({}, {"token": "t", "as-uid": "1234"}, r"user 'u': as-uid is not supported"),
        "as-user-extra": (
            {}, {"token": "t", "as": "x", "as-user-extra": {"scopes": ["a"]}},
            r"as-user-extra is not supported"),
        "as-groups-without-as": (
            {}, {"token": "t", "as-groups": ["g"]}, r"user 'u': as-groups needs as"),
        "token-and-exec": (
            {}, {"token": "t", "exec": EXEC_V1}, r"user 'u': both a token and an exec plugin"),
        # the certificate authority
        "ca-file-missing": (
            {"certificate-authority": "missing.crt"}, {},
            r"cluster 'c': cannot read certificate-authority .*missing\.crt: No such file"),
        "ca-not-pem": (
            {"certificate-authority-data": b64(b"hello, not a certificate")}, {},
            r"cluster 'c': certificate-authority is not a PEM certificate"),
        "ca-der": (
            {"certificate-authority-data": b64(b"\x30\x82\x01\x0a\xff\xfe")}, {},
            r"certificate-authority is not PEM \(binary data; DER\?\)"),
        "ca-bad-pem": (
            {"certificate-authority-data": b64(bad_pem)}, {},
            r"cluster 'c': certificate-authority cannot be loaded"),
        "ca-bad-base64": (
            {"certificate-authority-data": "not base64!"}, {},
            r"cluster 'c': certificate-authority-data is not valid base64"),
        "insecure-and-ca": (
            {"insecure-skip-tls-verify": True, "certificate-authority-data": ca}, {},
            r"insecure-skip-tls-verify cannot be combined with a certificate-authority"),
        # the client certificate
        "key-bad-base64": (
            {}, {"client-certificate-data": cert, "client-key-data": "@@@"},
            r"user 'u': client-key-data is not valid base64"),
        "key-missing": (
            {}, {"client-certificate-data": cert},
            r"user 'u': a client certificate needs both .* client-key is missing"),
        "cert-key-mismatch": (
            {}, {"client-certificate-data": cert, "client-key-data": b64(pem.other_key)},
            r"user 'u': client-certificate/client-key: the certificate and the key do not match"),
        "cert-not-pem": (
            {}, {"client-certificate-data": key, "client-key-data": key},
            r"the certificate is not PEM"),
        "key-not-pem": (
            {}, {"client-certificate-data": cert, "client-key-data": cert},
            r"the key is not a PEM private key"),
        "cert-file-missing": (
            {}, {"client-certificate": "nope.crt", "client-key": "nope.key"},
            r"cannot read client-certificate .*nope\.crt"),
        "token-file-missing": ({}, {"tokenFile": "nope"}, r"user 'u': cannot read tokenFile"),
        # the cluster
        "socks5-proxy": (
            {"proxy-url": "socks5://127.0.0.1:1080"}, {},
            r"cluster 'c': proxy-url 'socks5://127\.0\.0\.1:1080': SOCKS proxies are not "
            r"supported"),
        "ftp-proxy": (
            {"proxy-url": "ftp://127.0.0.1"}, {},
            r"proxy-url 'ftp://127\.0\.0\.1' is not an http:// or https:// URL"),
        "server-not-url": (
            {"server": "127.0.0.1:6443"}, {},
            r"cluster 'c': server '127\.0\.0\.1:6443' is not an https://"),
        "no-server": ({"server": ""}, {}, r"cluster 'c': no server"),
        # exec plugins
        "exec-v1alpha1": (
            {}, {"exec": {**EXEC_V1, "apiVersion": "client.authentication.k8s.io/v1alpha1"}},
            r"user 'u': exec: apiVersion 'client\.authentication\.k8s\.io/v1alpha1' is not "
            r"supported"),
        "exec-v1-no-interactive-mode": (
            {}, {"exec": {**EXEC_V1, "interactiveMode": None}},
            r"exec: interactiveMode is required with client\.authentication\.k8s\.io/v1"),
        "exec-always": (
            {}, {"exec": {**EXEC_V1, "interactiveMode": "Always"}},
            r"exec: interactiveMode Always needs a terminal"),
        "exec-bad-mode": (
            {}, {"exec": {**EXEC_V1, "interactiveMode": "Sometimes"}},
            r"exec: invalid interactiveMode 'Sometimes'"),
        "exec-missing-install-hint": (
            {}, {"exec": {**EXEC_V1, "command": "clusterhealth-no-such-plugin",
                          "installHint": hint}},
            r"exec: command 'clusterhealth-no-such-plugin' not found on PATH\n" + hint),
        "exec-missing-relative": (
            {}, {"exec": {**EXEC_V1, "command": "./plugins/get-token"}},
            r"exec: command './plugins/get-token' not found \(.*/plugins/get-token does not "
            r"exist\)"),
        "exec-env-without-name": (
            {}, {"exec": {**EXEC_V1, "env": [{"value": "x"}]}}, r"exec: env entries need a name"),
        "exec-no-command": (
            {}, {"exec": {**EXEC_V1, "command": ""}}, r"exec: command is required"),
    }


ERROR_CASES = list(_errors_table(Pem(b"", b"", b"", b"", b"")))


@pytest.mark.parametrize("case", ERROR_CASES)
def test_one_clear_error_at_load(tmp_path: pathlib.Path, pem: Pem, case: str) -> None:
    cluster, user, message = _errors_table(pem)[case]
    path = simple(tmp_path / "config", cluster=cluster, user=user or {"token": "t"})
    with pytest.raises(settings.SettingsError, match=message) as caught:
        settings.credentials_from(str(path), None)
    # One message naming the kubeconfig, the context and the entry (the field follows).
    assert str(caught.value).startswith(f"kubeconfig {path}, context 'dev', ")
    assert isinstance(caught.value.__cause__, errors.ConfigError)


@pytest.mark.parametrize(
    ("contexts", "message"),
    [
        ({"dev": {"cluster": "missing", "user": "u"}},
         r"context 'dev': no cluster named 'missing'"),
        ({"dev": {"cluster": "c", "user": "missing"}}, r"context 'dev': no user named 'missing'"),
        ({"dev": {"user": "u"}}, r"context 'dev': names no cluster"),
    ],
)
def test_dangling_references(tmp_path: pathlib.Path, contexts: dict[str, Any],
                             message: str) -> None:
    path = write_kubeconfig(tmp_path / "config", clusters={"c": {"server": SERVER}},
                            users={"u": {"token": "t"}}, contexts=contexts, current="dev")
    with pytest.raises(errors.ConfigError, match=message):
        config.load_kubeconfig(path)


def test_malformed_documents(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "config"
    path.write_text("clusters: {a: b}\n")
    with pytest.raises(errors.ConfigError, match="clusters must be a list"):
        config.load_kubeconfig(path)
    path.write_text("clusters:\n- cluster: {server: https://x}\n")
    with pytest.raises(errors.ConfigError, match=r"clusters\[0\] has no name"):
        config.load_kubeconfig(path)
    path.write_text("")
    with pytest.raises(errors.ConfigError, match="is empty or not a mapping"):
        config.load_kubeconfig(path)


def test_a_wrong_but_valid_ca_loads(tmp_path: pathlib.Path, pem: Pem) -> None:
    """A CA that parses cannot be known wrong before the first handshake (see the env test)."""
    path = simple(tmp_path / "config", cluster={"certificate-authority-data": b64(pem.other_ca)})
    assert config.load_kubeconfig(path).ca_data == pem.other_ca


def test_component_exits_2_with_the_message(tmp_path: pathlib.Path,
                                            python_env: dict[str, str]) -> None:
    path = simple(tmp_path / "config", user={"auth-provider": {"name": "gcp"}})
    result = subprocess.run(
        [sys.executable, "-m", "clusterhealth_remedy", "--kubeconfig", str(path)],
        env=python_env, capture_output=True, text=True, timeout=60, check=False,
    )
    assert result.returncode == 2, result.stderr
    assert f"kubeconfig {path}, context 'dev', user 'u': auth-provider 'gcp'" in result.stderr


# --- Karmada Cluster secrets ---------------------------------------------------------


def _secret(pem: Pem) -> dict[str, Any]:
    return {"metadata": {"name": "member1"},
            "data": {"caBundle": b64(pem.ca), "token": b64(b"member-token")}}


def test_cluster_secret_with_proxy(pem: Pem) -> None:
    creds = config.from_cluster_secret(
        "https://127.0.1.1:6443/", _secret(pem), proxy_url="http://127.0.0.1:3128",
        proxy_headers={"Proxy-Authorization": "Basic eDp5", "X-Tenant": "a,b"},
    )
    assert creds.server == "https://127.0.1.1:6443"
    assert creds.token == "member-token"
    assert creds.ca_data == pem.ca
    assert creds.proxy_url == "http://127.0.0.1:3128"
    assert creds.proxy_headers == (("Proxy-Authorization", "Basic eDp5"), ("X-Tenant", "a,b"))
    plain = config.from_cluster_secret("https://127.0.1.1:6443", _secret(pem), proxy_url="")
    assert (plain.proxy_url, plain.proxy_headers) == (None, ())


@pytest.mark.parametrize(
    ("proxy_url", "headers", "message"),
    [
        ("socks5://127.0.0.1:1080", {}, "SOCKS proxies are not supported"),
        ("127.0.0.1:3128", {}, "is not an http:// or https:// URL"),
        ("http://127.0.0.1:3128", {"Bad Header": "x"}, "'Bad Header' is not a valid HTTP header"),
        ("http://127.0.0.1:3128", {"X-Ok": "a\r\nInjected: 1"}, "not a valid HTTP header"),
    ],
)
def test_cluster_secret_bad_proxy(pem: Pem, proxy_url: str, headers: dict[str, str],
                                  message: str) -> None:
    with pytest.raises(errors.ConfigError, match=f"cluster secret member1: proxy.*{message}"):
        config.from_cluster_secret("https://127.0.1.1:6443", _secret(pem),
                                   proxy_url=proxy_url, proxy_headers=headers)


def test_cluster_secret_errors_name_the_secret() -> None:
    with pytest.raises(errors.ConfigError, match="cluster secret m1 has no 'token'"):
        config.from_cluster_secret("https://127.0.1.1:6443",
                                   {"metadata": {"name": "m1"}, "data": {}})
