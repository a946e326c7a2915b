"""The webhook's HTTPS server: reviews answered, bad requests refused, certificates rotated."""

from __future__ import annotations

import asyncio
import base64
import json
import pathlib
from typing import Any

import prometheus_client
import pytest
import whkit

from clusterhealth_controlplane.webhook import decision, server
from clusterhealth_localenv import pki


def review(obj: dict[str, Any], kind: str = "PropagationPolicy") -> bytes:
    return json.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-1", "operation": "CREATE", "object": obj,
                    "kind": {"group": "policy.karmada.io", "version": "v1alpha1",
                             "kind": kind}}}).encode()


POLICY: dict[str, Any] = {"spec": {"placement": {"clusterTolerations": [
    {"key": "cluster.karmada.io/unreachable", "operator": "Exists", "effect": "NoExecute"}]}}}


def sample(registry: prometheus_client.CollectorRegistry, name: str,
           **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


@pytest.fixture
def ca() -> pki.CertificateAuthority:
    return pki.CertificateAuthority()


@pytest.fixture
def volume(tmp_path: pathlib.Path, ca: pki.CertificateAuthority) -> pki.SecretVolume:
    secret = pki.SecretVolume(tmp_path)
    secret.write(whkit.issue(ca))
    return secret


async def test_answers_a_review_over_https(volume: pki.SecretVolume,
                                           ca: pki.CertificateAuthority) -> None:
    registry = prometheus_client.CollectorRegistry()
    defaults = decision.Defaults(not_ready_seconds=42, unreachable_seconds=7)
    async with whkit.running(volume, defaults=defaults, registry=registry) as webhook:
        assert webhook.ready() == (True, f"serving {server.PATH} over HTTPS on port "
                                         f"{webhook.bound_port}")
        answer, _ = await whkit.request(webhook.bound_port, ca, review(POLICY))
        assert answer.status == 200
        assert answer.headers["content-type"].startswith("application/json")
        response = json.loads(answer.body)
        assert response["apiVersion"] == "admission.k8s.io/v1"
        assert response["kind"] == "AdmissionReview"
        assert response["response"]["uid"] == "u-1"
        assert response["response"]["allowed"] is True
        assert json.loads(base64.b64decode(response["response"]["patch"])) == [
            {"op": "add", "path": "/spec/placement/clusterTolerations/-",
             "value": {"key": "cluster.karmada.io/not-ready", "operator": "Exists",
                       "effect": "NoExecute", "tolerationSeconds": 42}}]
        # a policy that has both: allowed without a patch
        both = {"spec": {"placement": {"clusterTolerations": [{"operator": "Exists"}]}}}
        answer, _ = await whkit.request(webhook.bound_port, ca,
                                        review(both, "ClusterPropagationPolicy"))
        assert json.loads(answer.body)["response"] == {"uid": "u-1", "allowed": True}
    assert not webhook.serving
    assert webhook.ready()[0] is False
    counted = {(kind, result): sample(registry,
                                      "clusterhealth_webhook_admission_requests_total",
                                      kind=kind, result=result)
               for kind in decision.KINDS for result in (decision.MUTATED, decision.UNCHANGED)}
    assert counted == {("PropagationPolicy", "mutated"): 1.0,
                       ("PropagationPolicy", "unchanged"): 0.0,
                       ("ClusterPropagationPolicy", "mutated"): 0.0,
                       ("ClusterPropagationPolicy", "unchanged"): 1.0}
    assert sample(registry, "clusterhealth_webhook_admission_duration_seconds_count") == 2.0


async def test_keeps_connections_open_for_the_api_server(
        volume: pki.SecretVolume, ca: pki.CertificateAuthority) -> None:
    async with whkit.running(volume) as webhook, \
            whkit.connection(webhook.bound_port, ca) as (reader, writer, _):
        for _ in range(3):
            answer = await whkit.exchange(reader, writer, review(POLICY), keep_alive=True)
            assert answer.status == 200
            assert json.loads(answer.body)["response"]["allowed"] is True


async def test_bad_requests(volume: pki.SecretVolume, ca: pki.CertificateAuthority) -> None:
    registry = prometheus_client.CollectorRegistry()
    async with whkit.running(volume, registry=registry, max_body_bytes=4096) as webhook:
        port = webhook.bound_port
        answer, _ = await whkit.request(port, ca, b"{not json")
        assert answer.status == 400
        assert answer.body.startswith(b"the body is not JSON")
        answer, _ = await whkit.request(port, ca, json.dumps(
            {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}).encode())
        assert (answer.status, answer.body) == (
            400, b"expected an admission.k8s.io/v1 AdmissionReview, got apiVersion "
                 b"'admission.k8s.io/v1beta1' kind 'AdmissionReview'\n")
        answer, _ = await whkit.request(port, ca, b"x" * 5000)
        assert (answer.status, answer.body) == (
            413, b"the AdmissionReview of 5000 bytes is over this webhook's limit of 4096 "
                 b"bytes; nothing of it was read\n")
        answer, _ = await whkit.request(port, ca, b"", method="GET")
        assert answer.status == 405
        answer, _ = await whkit.request(port, ca, review(POLICY), path="/mutate")
        assert answer.status == 404
        # a malformed policy: allowed, with the warning kubectl shows
        answer, _ = await whkit.request(port, ca, review({"spec": {"placement": []}}))
        assert json.loads(answer.body)["response"] == {
            "uid": "u-1", "allowed": True,
            "warnings": [f"{decision.WARNING_PREFIX}: spec.placement is not an object"]}
    assert sample(registry, "clusterhealth_webhook_admission_requests_total",
                  kind="other", result="invalid") == 2.0
    assert sample(registry, "clusterhealth_webhook_admission_requests_total",
                  kind="other", result="too_large") == 1.0
    assert sample(registry, "clusterhealth_webhook_admission_requests_total",
                  kind="PropagationPolicy", result="malformed") == 1.0


async def _answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    async with asyncio.timeout(10):
        status_line = await reader.readline()
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length")))
        return int(status_line.split()[1]), await reader.readexactly(length)


async def test_a_huge_review_is_refused_before_it_is_read(
        volume: pki.SecretVolume, ca: pki.CertificateAuthority) -> None:
    """413 with a clear message, and memory stays: a declared GiB is refused on its header
    alone (the body is never sent), a chunked one as soon as it passes the limit."""
    registry = prometheus_client.CollectorRegistry()
    async with whkit.running(volume, registry=registry) as webhook, \
            whkit.connection(webhook.bound_port, ca) as (reader, writer, _):
        writer.write(f"POST {server.PATH} HTTP/1.1\r\nHost: localhost\r\n"
                     f"Content-Type: application/json\r\nContent-Length: {2 ** 30}\r\n"
                     "\r\n".encode())
        status, body = await _answer(reader)
        assert status == 413
        assert body == (f"the AdmissionReview of {2 ** 30} bytes is over this webhook's limit "
                        f"of {server.MAX_BODY_BYTES} bytes; nothing of it was read\n").encode()
    assert sample(registry, "clusterhealth_webhook_admission_requests_total",
                  kind="other", result="too_large") == 1.0
    registry = prometheus_client.CollectorRegistry()
    async with whkit.running(volume, registry=registry, max_body_bytes=4096) as webhook, \
            whkit.connection(webhook.bound_port, ca) as (reader, writer, _):
        writer.write(f"POST {server.PATH} HTTP/1.1\r\nHost: localhost\r\n"
                     "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                     "Connection: close\r\n"
                     "\r\n".encode())
        for _ in range(3):
            writer.write(b"800\r\n" + b"x" * 2048 + b"\r\n")
        status, body = await _answer(reader)
        assert (status, body) == (413, b"the AdmissionReview is over this webhook's limit of "
                                       b"4096 bytes; it was read up to the limit and dropped\n")
    assert sample(registry, "clusterhealth_webhook_admission_requests_total",
                  kind="other", result="too_large") == 1.0


async def test_metrics_name_only_the_kinds_served(
        volume: pki.SecretVolume, ca: pki.CertificateAuthority) -> None:
    """Whatever kinds the requests claim, the metric has three kind values: no series per
    string a client sends."""
    registry = prometheus_client.CollectorRegistry()
    async with whkit.running(volume, registry=registry) as webhook:
        for kind in ("PropagationPolicy", "OverridePolicy", "x" * 200, "Evil-1", "Evil-2"):
            answer, _ = await whkit.request(webhook.bound_port, ca, review(POLICY, kind))
            assert answer.status == 200
        other_group = json.loads(review(POLICY, "Deployment"))
        other_group["request"]["kind"]["group"] = "apps"
        answer, _ = await whkit.request(webhook.bound_port, ca,
                                        json.dumps(other_group).encode())
        assert answer.status == 200
    kinds = {s.labels["kind"] for family in registry.collect() for s in family.samples
             if s.name == "clusterhealth_webhook_admission_requests_total"}
    assert kinds == {"PropagationPolicy", "ClusterPropagationPolicy", "other"}
    assert sample(registry, "clusterhealth_webhook_admission_requests_total",
                  kind="other", result="ignored") == 5.0


async def test_every_address_by_default(volume: pki.SecretVolume,
                                        ca: pki.CertificateAuthority) -> None:
    async with whkit.running(volume, host="::") as webhook:
        for host in ("127.0.0.1", "::1"):
            answer, _ = await whkit.request(webhook.bound_port, ca, review(POLICY), host=host)
            assert answer.status == 200


async def test_certificate_rotation_without_restart(
        tmp_path: pathlib.Path, ca: pki.CertificateAuthority,
        caplog: pytest.LogCaptureFixture) -> None:
    volume = pki.SecretVolume(tmp_path)
    first, second, third = whkit.issue(ca), whkit.issue(ca), whkit.issue(ca)
    volume.write(first)
    clock = whkit.SteppedClock()
    registry = prometheus_client.CollectorRegistry()
    async with whkit.running(volume, clock=clock, reload_interval=30.0,
                             registry=registry) as webhook:
        port = webhook.bound_port
        assert (await whkit.request(port, ca, review(POLICY)))[1] == whkit.serial(first)
        async with whkit.connection(port, ca) as (reader, writer, early):
            assert early == whkit.serial(first)
            volume.write(second)  # kubelet swaps ..data: both files at once
            clock.t += 10  # within the interval: the files are not looked at yet
            assert (await whkit.request(port, ca, review(POLICY)))[1] == whkit.serial(first)
            clock.t += 20
            answer, served = await whkit.request(port, ca, review(POLICY))
            assert (answer.status, served) == (200, whkit.serial(second))
            assert (await whkit.request(port, ca, review(POLICY), host="127.0.0.1"))[1] \
                == whkit.serial(second)
            # the connection opened before the rotation keeps its certificate, and works
            answer = await whkit.exchange(reader, writer, review(POLICY), keep_alive=True)
            assert answer.status == 200
        # a broken rotation (the key of another certificate) keeps the working one
        volume.write(third, key_pem=first.key_pem)
        clock.t += 30
        assert (await whkit.request(port, ca, review(POLICY)))[1] == whkit.serial(second)
        assert "keeping the current TLS certificate" in caplog.text
        # ... until the pair is whole again
        volume.write(third)
        clock.t += 30
        assert (await whkit.request(port, ca, review(POLICY)))[1] == whkit.serial(third)
    assert sample(registry, "clusterhealth_webhook_certificate_reloads_total") == 2.0


async def test_start_fails_on_a_taken_port(volume: pki.SecretVolume) -> None:
    async with whkit.running(volume) as first:
        with pytest.raises(OSError, match="in use"):
            async with whkit.running(volume, port=first.bound_port):
                pass
