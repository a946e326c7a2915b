"""The probe configuration file: the valid format, and every mistake named by field path."""

from __future__ import annotations

import pathlib
import textwrap

import pytest

from clusterhealth_agent.probes import config, registry
from clusterhealth_core import settings

VALID = """\
probes:
  - name: payments-api
    type: http
    conditionType: PaymentsAPIReachable
    timeout: 2s
    http: {url: "http://198.18.0.5:8080/healthz", expectStatus: [200, 204],
           insecureSkipVerify: false}
  - name: db
    type: tcp
    conditionType: DatabaseReachable
    tcp: {host: 198.18.0.6, port: 5432}
  - name: external-names
    type: dns
    conditionType: example.com/ExternalNameResolutionReady
    timeout: 500ms
    dns: {query: "example.com", nameservers: ["198.18.0.10:53", "fd00::10"], recordType: AAAA}
  - name: secure
    type: http
    conditionType: SecureReachable
    http: {url: "https://198.18.0.7/"}
"""


def write(tmp_path: pathlib.Path, text: str) -> pathlib.Path:
    path = tmp_path / "probes.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_valid_file(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, VALID)
    specs = config.load_file(path, registry.BUILTIN_CONDITION_TYPES)
    assert specs == [
        config.HTTPProbeSpec(
            name="payments-api", condition_type="PaymentsAPIReachable", timeout=2.0,
            location=f"{path}: probes[0]", url="http://198.18.0.5:8080/healthz",
            expect_status=(200, 204), insecure_skip_verify=False,
        ),
        config.TCPProbeSpec(
            name="db", condition_type="DatabaseReachable", location=f"{path}: probes[1]",
            host="198.18.0.6", port=5432,
        ),
        config.DNSProbeSpec(
            name="external-names", condition_type="example.com/ExternalNameResolutionReady",
            timeout=0.5, location=f"{path}: probes[2]", query="example.com.",
            nameservers=(("198.18.0.10", 53), ("fd00::10", 53)), record_type="AAAA",
        ),
        config.HTTPProbeSpec(
            name="secure", condition_type="SecureReachable", location=f"{path}: probes[3]",
            url="https://198.18.0.7/", expect_status=(range(200, 400),),
        ),
    ]
    config.check_timeouts(specs, 5.0)


@pytest.mark.parametrize("text", ["", "# nothing yet\n", "probes: []\n", "probes:\n"])
def test_empty_files_mean_no_probes(tmp_path: pathlib.Path, text: str) -> None:
    assert config.load_file(write(tmp_path, text), registry.BUILTIN_CONDITION_TYPES) == []


def probe(body: str, header: str = "name: p\ntype: tcp\nconditionType: PReady\n") -> str:
    lines = (header + body).strip().splitlines()
    return "probes:\n  - " + "\n    ".join(lines) + "\n"


TCP = "tcp: {host: 198.18.0.6, port: 5432}\n"
INVALID = [
    # (file, the expected message after "probes.yaml: ")
    ("- 1\n", "must be a mapping, not list"),
    ("probe: []\n", "probe: unknown field (did you mean 'probes'?)"),
    ("probes: {name: x}\n", "probes: must be a list, not dict"),
    ("probes: [3]\n", "probes[0]: must be a mapping, not int"),
    ("probes: [{type: tcp, conditionType: A, tcp: {host: h, port: 1}}]\n",
     "probes[0].name: required"),
    (probe(TCP, "name: Bad_Name\ntype: tcp\nconditionType: PReady\n"),
     "probes[0].name: 'Bad_Name' must be a DNS label"),
    (probe(TCP, "name: dns\ntype: tcp\nconditionType: PReady\n"),
     "probes[0].name: 'dns' is the name of a built-in detector"),
    (probe(TCP, "name: p\ntype: udp\nconditionType: PReady\n"),
     "probes[0].type: 'udp' is not one of http, tcp, dns"),
    (probe(TCP, "name: p\ntype: tcp\n"), "probes[0].conditionType: required"),
    (probe(TCP, "name: p\ntype: tcp\nconditionType: 'not a type'\n"),
     "probes[0].conditionType: 'not a type' is not a valid condition type"),
    (probe(TCP, "name: p\ntype: tcp\nconditionType: Ready\n"),
     "probes[0].conditionType: 'Ready' is reserved"),
    (probe(TCP, "name: p\ntype: tcp\nconditionType: ServiceDomainNameResolutionReady\n"),
     "probes[0].conditionType: 'ServiceDomainNameResolutionReady' is the condition type of "
     "a built-in detector"),
    (probe(TCP, "name: p\ntype: tcp\nconditionType: KubeProxyReady\n"),
     "probes[0].conditionType: 'KubeProxyReady' is the condition type of a built-in"),
    (probe(TCP + "timeout: soon\n"), "probes[0].timeout: 'soon' is not a duration"),
    (probe(TCP + "timeout: 0s\n"), "probes[0].timeout: '0s': the duration must be > 0"),
    (probe(TCP + "timout: 2s\n"), "probes[0].timout: unknown field (did you mean 'timeout'?)"),
    (probe(TCP + "http: {url: 'http://x/'}\n"),
     "probes[0].http: not allowed in a probe of type tcp"),
    (probe(""), "probes[0].tcp: required"),
    (probe("tcp: {host: 198.18.0.6}\n"), "probes[0].tcp.port: required"),
    (probe("tcp: {host: 198.18.0.6, port: '5432'}\n"),
     "probes[0].tcp.port: must be an integer, not str"),
    (probe("tcp: {host: 198.18.0.6, port: 70000}\n"),
     "probes[0].tcp.port: 70000 is not in 1-65535"),
    (probe("tcp: {host: 198.18.0.6, port: 1, hots: x}\n"),
     "probes[0].tcp.hots: unknown field (did you mean 'host'?)"),
    (probe("tcp: {host: '', port: 1}\n"), "probes[0].tcp.host: must be a non-empty string"),
    (probe("http: {url: 'ftp://198.18.0.5/'}\n", "name: p\ntype: http\nconditionType: PReady\n"),
     "probes[0].http.url: must be an http(s) URL"),
    (probe("http: {url: 'http://198.18.0.5:http/'}\n",
           "name: p\ntype: http\nconditionType: PReady\n"),
     "probes[0].http.url: must be an http(s) URL"),
    (probe("http: {url: 'http://x/', expectStatus: [200, 99]}\n",
           "name: p\ntype: http\nconditionType: PReady\n"),
     "probes[0].http.expectStatus[1]: 99 is not in 100-599"),
    (probe("http: {url: 'http://x/', expectStatus: 200}\n",
           "name: p\ntype: http\nconditionType: PReady\n"),
     "probes[0].http.expectStatus: must be a non-empty list"),
    (probe("http: {url: 'http://x/', insecureSkipVerify: 'yes please'}\n",
           "name: p\ntype: http\nconditionType: PReady\n"),
     "probes[0].http.insecureSkipVerify: must be true or false"),
    (probe("http: {url: 'http://x/', expect_status: [200]}\n",
           "name: p\ntype: http\nconditionType: PReady\n"),
     "probes[0].http.expect_status: unknown field (did you mean 'expectStatus'?)"),
    (probe("dns: {query: 'a..b'}\n", "name: p\ntype: dns\nconditionType: PReady\n"),
     "probes[0].dns.query: 'a..b' is not a domain name"),
    (probe("dns: {query: a.example, nameservers: [kube-dns]}\n",
           "name: p\ntype: dns\nconditionType: PReady\n"),
     "probes[0].dns.nameservers[0]: 'kube-dns' is not an IP address"),
    (probe("dns: {query: a.example, nameservers: 198.18.0.10}\n",
           "name: p\ntype: dns\nconditionType: PReady\n"),
     "probes[0].dns.nameservers: must be a list, not str"),
    (probe("dns: {query: a.example, recordType: MX}\n",
           "name: p\ntype: dns\nconditionType: PReady\n"),
     "probes[0].dns.recordType: 'MX' is not one of A, AAAA"),
    ("probes:\n  - name: a\n    type: tcp\n    conditionType: AReady\n    " + TCP
     + "  - name: a\n    type: tcp\n    conditionType: BReady\n    " + TCP,
     "probes[1].name: duplicate name 'a' (also probes[0])"),
    ("probes:\n  - name: a\n    type: tcp\n    conditionType: SameReady\n    " + TCP
     + "  - name: b\n    type: tcp\n    conditionType: SameReady\n    " + TCP,
     "probes[1].conditionType: duplicate condition type 'SameReady' (also probes[0])"),
    (probe(TCP + "name: q\n"), "not valid YAML: duplicate key 'name'"),
    ("probes: [\n", "not valid YAML"),
]


@pytest.mark.parametrize(("text", "message"), INVALID, ids=[m for _, m in INVALID])
def test_invalid_files_name_the_field(tmp_path: pathlib.Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(config.ProbeConfigError) as caught:
        config.load_file(path, registry.BUILTIN_CONDITION_TYPES)
    assert str(caught.value).startswith(f"{path}: {message}"), str(caught.value)


def test_example_message_from_the_docs() -> None:
    text = probe("http: {url: not-a-url}\n", "name: p\ntype: http\nconditionType: PReady\n")
    with pytest.raises(config.ProbeConfigError) as caught:
        config.parse(text, source="probes.yaml", builtins=registry.BUILTIN_CONDITION_TYPES)
    assert str(caught.value) == "probes.yaml: probes[0].http.url: must be an http(s) URL"


def test_unreadable_file(tmp_path: pathlib.Path) -> None:
    with pytest.raises(config.ProbeConfigError, match=r"missing\.yaml: cannot read"):
        config.load_file(tmp_path / "missing.yaml", registry.BUILTIN_CONDITION_TYPES)


def test_timeout_must_be_shorter_than_the_detect_period(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, probe(TCP + "timeout: 5s\n"))
    specs = config.load_file(path, registry.BUILTIN_CONDITION_TYPES)
    config.check_timeouts(specs, 10.0)
    with pytest.raises(config.ProbeConfigError) as caught:
        config.check_timeouts(specs, 5.0)
    assert str(caught.value) == (
        f"{path}: probes[0].timeout: 5s must be shorter than the detect period (5s)"
    )


def test_is_a_settings_error() -> None:
    # The agent's main prints SettingsError and exits 2, before anything starts.
    assert issubclass(config.ProbeConfigError, settings.SettingsError)
