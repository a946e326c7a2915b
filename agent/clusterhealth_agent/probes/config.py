"""The probe configuration file: user-defined HTTP, TCP and DNS probes.

The file is mounted from a ConfigMap and read once, before anything starts.
Every mistake is fatal and named precisely (``probes.yaml:
probes[1].http.url: must be an http(s) URL``): a typo in a key, a duplicate
name or condition type, or a condition type that would collide with one the
agent or Karmada writes must never be silently ignored, because the result
would be a probe that quietly does not run, or two writers fighting over one
condition.

Format::

    probes:
      - name: payments-api                  # unique, a DNS label
        type: http                          # http | tcp | dns
        conditionType: PaymentsAPIReachable # unique, not a built-in type
        timeout: 2s                         # optional, < the detect period
        http: {url: "http://10.0.0.5:8080/healthz", expectStatus: [200, 204]}
      - name: db
        type: tcp
        conditionType: DatabaseReachable
        tcp: {host: 10.0.0.6, port: 5432}
      - name: external-names
        type: dns
        conditionType: ExternalNameResolutionReady
        dns: {query: "example.com.", nameservers: ["10.0.0.10:53"], recordType: A}
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import pathlib
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import dns.exception
import dns.name
import yaml

from clusterhealth_agent.probes import dns as dns_probe
from clusterhealth_agent.probes import http as http_probe
from clusterhealth_core import settings
from clusterhealth_core.api import meta

PROBE_TYPES = ("http", "tcp", "dns")
RESERVED_CONDITION_TYPES = frozenset({"Ready", "CompleteAPIEnablements"})
"""Written by Karmada's cluster-status controller; no probe may claim them."""

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NAME_MAX = 63
_CONDITION_TYPE_MAX = 316  # metav1.Condition.type maxLength


class ProbeConfigError(settings.SettingsError):
    """The probe configuration file is unusable; the message names the file and field."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class BaseSpec:
    """What every configured probe has."""

    name: str
    condition_type: str
    timeout: float | None = None
    """Seconds; ``None`` means the agent's default probe deadline."""
    location: str = ""
    """Where it was configured, for later errors: ``probes.yaml: probes[1]``."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class HTTPProbeSpec(BaseSpec):
    """``type: http``: GET a URL and expect a status."""

    url: str
    expect_status: tuple[range | int, ...] = http_probe.DEFAULT_EXPECT_STATUS
    insecure_skip_verify: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class TCPProbeSpec(BaseSpec):
    """``type: tcp``: open a connection to ``host:port``."""

    host: str
    port: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class DNSProbeSpec(BaseSpec):
    """``type: dns``: resolve a name to addresses."""

    query: str
    """Absolute (ends with a dot)."""
    nameservers: tuple[tuple[str, int], ...] = ()
    """Empty: the nameservers of the pod's resolv.conf."""
    record_type: str = "A"


ProbeSpec = HTTPProbeSpec | TCPProbeSpec | DNSProbeSpec


class _StrictLoader(yaml.SafeLoader):
    """A safe loader that rejects duplicate keys (PyYAML keeps the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                if key_node.value in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key_node.value!r}", key_node.start_mark
                    )
                seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)


def load_file(path: str | os.PathLike[str], builtins: Mapping[str, str]) -> list[ProbeSpec]:
    """Read and validate the file at ``path``; an empty file means no custom probes.

    ``builtins`` maps each built-in detector's name to its condition type
    (``registry.BUILTIN_CONDITION_TYPES``); custom probes may use neither.
    """
    source = os.fspath(path)
    try:
        text = pathlib.Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ProbeConfigError(f"{source}: cannot read: {exc}") from exc
    return parse(text, source=source, builtins=builtins)


def parse(text: str, *, source: str, builtins: Mapping[str, str]) -> list[ProbeSpec]:
    """Validate the text of a probe configuration file (see :func:`load_file`)."""
    try:
        document = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ProbeConfigError(f"{source}: not valid YAML: {exc}") from exc
    return _Validator(source, builtins).config(document)


def check_timeouts(specs: Sequence[ProbeSpec], detect_period: float) -> None:
    """Every probe's timeout must end before the next detect cycle starts."""
    for spec in specs:
        if spec.timeout is not None and spec.timeout >= detect_period:
            raise ProbeConfigError(
                f"{spec.location or spec.name}.timeout: {spec.timeout:g}s must be "
                f"shorter than the detect period ({detect_period:g}s)"
            )


@dataclasses.dataclass(frozen=True)
class _Common:
    name: str
    condition_type: str
    timeout: float | None
    location: str


class _Validator:
    """Walks the parsed YAML; the first problem raises with its field path."""

    def __init__(self, source: str, builtins: Mapping[str, str]) -> None:
        self.source = source
        self.builtin_names = frozenset(builtins)
        self.builtin_types = frozenset(builtins.values())

    def fail(self, path: str, message: str) -> NoReturn:
        where = f"{self.source}: {path}: " if path else f"{self.source}: "
        raise ProbeConfigError(where + message)

    def mapping(self, value: Any, path: str, known: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(path, f"must be a mapping, not {_kind(value)}")
        for key in value:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known)}"
                self.fail(_join(path, str(key)), f"unknown field ({hint})")
        return value

    def string(self, value: Any, path: str) -> str:
        if not isinstance(value, str) or not value.strip():
            self.fail(path, "must be a non-empty string")
        return value.strip()

    def integer(self, value: Any, path: str, low: int, high: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(path, f"must be an integer, not {_kind(value)}")
        if not low <= value <= high:
            self.fail(path, f"{value} is not in {low}-{high}")
        return value

    def required(self, section: dict[str, Any], key: str, path: str) -> Any:
        if section.get(key) is None:
            self.fail(_join(path, key), "required")
        return section[key]

    # --- the document ----------------------------------------------------

    def config(self, document: Any) -> list[ProbeSpec]:
        if document is None:
            return []
        top = self.mapping(document, "", ("probes",))
        items = top.get("probes")
        if items is None:
            return []
        if not isinstance(items, list):
            self.fail("probes", f"must be a list, not {_kind(items)}")
        specs: list[ProbeSpec] = []
        names: dict[str, int] = {}
        types: dict[str, int] = {}
        for index, item in enumerate(items):
            path = f"probes[{index}]"
            spec = self.probe(item, path)
            if spec.name in names:
                self.fail(
                    f"{path}.name",
                    f"duplicate name {spec.name!r} (also probes[{names[spec.name]}])",
                )
            if spec.condition_type in types:
                self.fail(
                    f"{path}.conditionType",
                    f"duplicate condition type {spec.condition_type!r} "
                    f"(also probes[{types[spec.condition_type]}])",
                )
            names[spec.name] = index
            types[spec.condition_type] = index
            specs.append(spec)
        return specs

    def probe(self, item: Any, path: str) -> ProbeSpec:
        section = self.mapping(
            item, path, ("name", "type", "conditionType", "timeout", *PROBE_TYPES)
        )
        name = self.name(self.required(section, "name", path), f"{path}.name")
        kind = self.string(self.required(section, "type", path), f"{path}.type")
        if kind not in PROBE_TYPES:
            self.fail(f"{path}.type", f"{kind!r} is not one of {', '.join(PROBE_TYPES)}")
        condition_type = self.condition_type(
            self.required(section, "conditionType", path), f"{path}.conditionType"
        )
        timeout = None
        if section.get("timeout") is not None:
            timeout = self.duration(section["timeout"], f"{path}.timeout")
        for other in PROBE_TYPES:
            if other != kind and other in section:
                self.fail(_join(path, other), f"not allowed in a probe of type {kind}")
        body = self.required(section, kind, path)
        common = _Common(name, condition_type, timeout, f"{self.source}: {path}")
        if kind == "http":
            return self.http(body, f"{path}.http", common)
        if kind == "tcp":
            return self.tcp(body, f"{path}.tcp", common)
        return self.dns(body, f"{path}.dns", common)

    def name(self, value: Any, path: str) -> str:
        name = self.string(value, path)
        if len(name) > _NAME_MAX or not _NAME.match(name):
            self.fail(
                path,
                f"{name!r} must be a DNS label (lower-case letters, digits and '-', "
                f"at most {_NAME_MAX} characters)",
            )
        if name in self.builtin_names:
            self.fail(path, f"{name!r} is the name of a built-in detector")
        return name

    def condition_type(self, value: Any, path: str) -> str:
        condition_type = self.string(value, path)
        if len(condition_type) > _CONDITION_TYPE_MAX or not re.match(
            meta.CONDITION_TYPE_PATTERN, condition_type
        ):
            self.fail(
                path, f"{condition_type!r} is not a valid condition type (e.g. DatabaseReachable)"
            )
        if condition_type in RESERVED_CONDITION_TYPES:
            self.fail(path, f"{condition_type!r} is reserved for the cluster-status controller")
        if condition_type in self.builtin_types:
            self.fail(path, f"{condition_type!r} is the condition type of a built-in detector")
        return condition_type

    def duration(self, value: Any, path: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            self.fail(path, f"must be a duration like 2s or 500ms, not {_kind(value)}")
        try:
            return settings.duration(str(value))
        except argparse.ArgumentTypeError as exc:
            self.fail(path, str(exc))

    def http(self, value: Any, path: str, common: _Common) -> HTTPProbeSpec:
        section = self.mapping(value, path, ("url", "expectStatus", "insecureSkipVerify"))
        url = self.string(self.required(section, "url", path), f"{path}.url")
        parsed = urllib.parse.urlsplit(url)
        try:
            _ = parsed.port  # raises on a bad port
        except ValueError:
            self.fail(f"{path}.url", "must be an http(s) URL (bad port)")
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            self.fail(f"{path}.url", "must be an http(s) URL")
        expect_status = http_probe.DEFAULT_EXPECT_STATUS
        if section.get("expectStatus") is not None:
            codes = section["expectStatus"]
            if not isinstance(codes, list) or not codes:
                self.fail(f"{path}.expectStatus", "must be a non-empty list of status codes")
            expect_status = tuple(
                self.integer(code, f"{path}.expectStatus[{i}]", 100, 599)
                for i, code in enumerate(codes)
            )
        skip = section.get("insecureSkipVerify", False)
        if not isinstance(skip, bool):
            self.fail(f"{path}.insecureSkipVerify", "must be true or false")
        return HTTPProbeSpec(
            name=common.name, condition_type=common.condition_type, timeout=common.timeout,
            location=common.location, url=url,
            expect_status=expect_status, insecure_skip_verify=skip,
        )

    def tcp(self, value: Any, path: str, common: _Common) -> TCPProbeSpec:
        section = self.mapping(value, path, ("host", "port"))
        host = self.string(self.required(section, "host", path), f"{path}.host")
        port = self.integer(self.required(section, "port", path), f"{path}.port", 1, 65535)
        return TCPProbeSpec(
            name=common.name, condition_type=common.condition_type, timeout=common.timeout,
            location=common.location, host=host.strip("[]"), port=port,
        )

    def dns(self, value: Any, path: str, common: _Common) -> DNSProbeSpec:
        section = self.mapping(value, path, ("query", "nameservers", "recordType"))
        query = self.string(self.required(section, "query", path), f"{path}.query")
        try:
            absolute = dns.name.from_text(query).to_text()
        except dns.exception.DNSException as exc:
            self.fail(f"{path}.query", f"{query!r} is not a domain name: {exc}")
        parsed: list[tuple[str, int]] = []
        if section.get("nameservers") is not None:
            servers = section["nameservers"]
            if not isinstance(servers, list):
                self.fail(f"{path}.nameservers", f"must be a list, not {_kind(servers)}")
            for i, server in enumerate(servers):
                server_path = f"{path}.nameservers[{i}]"
                try:
                    parsed.append(dns_probe.parse_nameserver(self.string(server, server_path)))
                except ValueError as exc:
                    self.fail(server_path, str(exc))
        record_type = "A"
        if section.get("recordType") is not None:
            record_type = self.string(section["recordType"], f"{path}.recordType")
            if record_type not in dns_probe.RECORD_TYPES:
                self.fail(
                    f"{path}.recordType",
                    f"{record_type!r} is not one of {', '.join(dns_probe.RECORD_TYPES)}",
                )
        return DNSProbeSpec(
            name=common.name, condition_type=common.condition_type, timeout=common.timeout,
            location=common.location, query=absolute,
            nameservers=tuple(parsed), record_type=record_type,
        )


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__
