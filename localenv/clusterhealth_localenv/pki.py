"""Certificates and keys for the local API servers, made fresh for every environment.

One CA per environment signs each API server's serving certificate (with IP
SANs, since members are addressed by IP) and an admin client certificate in
``system:masters``.  Each API server also gets a service-account signing key.
In Karmada mode a second CA, the front-proxy CA, signs the control plane's
aggregation proxy client certificate (:class:`clusterhealth_localenv.karmada.FrontProxy`).
:class:`SecretVolume` publishes a pair as kubelet mounts a ``kubernetes.io/tls``
Secret, so that tests rotate certificates the way a pod sees it;
:func:`write_kubeconfig` writes a client certificate's kubeconfig.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import os
import pathlib

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=30)


@dataclasses.dataclass(frozen=True)
class KeyPair:
    """A PEM certificate and its PEM private key."""

    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: pathlib.Path, stem: str) -> tuple[pathlib.Path, pathlib.Path]:
        """Write ``<stem>.crt`` and ``<stem>.key`` (0600) and return their paths."""
        cert = directory / f"{stem}.crt"
        key = directory / f"{stem}.key"
        cert.write_bytes(self.cert_pem)
        key.touch(mode=0o600)
        key.write_bytes(self.key_pem)
        return cert, key


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


class CertificateAuthority:
    """A self-signed CA that issues serving and client certificates."""

    def __init__(self, common_name: str = "clusterhealth-local-ca") -> None:
        self._key = _key()
        now = datetime.datetime.now(datetime.UTC)
        subject = _name(common_name)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, content_commitment=False, key_encipherment=False,
                    data_encipherment=False, key_agreement=False, key_cert_sign=True,
                    crl_sign=True, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        """The CA certificate (the bundle clients trust)."""
        return self._cert.public_bytes(serialization.Encoding.PEM)

    def _issue(
        self,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        sans: list[x509.GeneralName] | None = None,
    ) -> KeyPair:
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))

    def serving(self, common_name: str, ips: list[str], dns_names: list[str]) -> KeyPair:
        """A TLS serving certificate valid for the given IPs and names."""
        sans: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        sans += [x509.DNSName(name) for name in dns_names]
        return self._issue(_name(common_name), ExtendedKeyUsageOID.SERVER_AUTH, sans)

    def client(self, user: str, group: str | None = None) -> KeyPair:
        """A client certificate authenticating as ``user`` in ``group``."""
        return self._issue(_name(user, group), ExtendedKeyUsageOID.CLIENT_AUTH)


def service_account_keys() -> tuple[bytes, bytes]:
    """A (private PEM, public PEM) key pair for signing service-account tokens."""
    key = _key()
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return _key_pem(key), public


class SecretVolume:
    """A directory laid out like a mounted ``kubernetes.io/tls`` Secret.

    ``tls.crt`` and ``tls.key`` are symlinks through ``..data`` to a versioned
    directory; :meth:`write` publishes a new version by swapping ``..data``
    atomically, as kubelet's AtomicWriter does: both files change at once.
    """

    def __init__(self, root: pathlib.Path) -> None:
        self.root = root
        self.generation = 0

    @property
    def cert(self) -> str:
        """The certificate's path (through the symlinks)."""
        return str(self.root / "tls.crt")

    @property
    def key(self) -> str:
        """The private key's path (through the symlinks)."""
        return str(self.root / "tls.key")

    def write(self, pair: KeyPair, key_pem: bytes | None = None) -> None:
        """Publish ``pair`` (with another key: ``key_pem``, a broken rotation)."""
        self.generation += 1
        version = self.root / f"..v{self.generation}"
        version.mkdir(parents=True)
        (version / "tls.crt").write_bytes(pair.cert_pem)
        (version / "tls.key").write_bytes(key_pem if key_pem is not None else pair.key_pem)
        tmp = self.root / "..data_tmp"
        os.symlink(version.name, tmp)
        os.replace(tmp, self.root / "..data")
        for name in ("tls.crt", "tls.key"):
            if not (self.root / name).is_symlink():
                os.symlink(f"..data/{name}", self.root / name)


def write_kubeconfig(
    path: pathlib.Path, name: str, server: str, ca: pathlib.Path,
    cert: pathlib.Path, key: pathlib.Path,
) -> None:
    """A kubeconfig for ``server`` trusting ``ca``, authenticating with a client certificate."""
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server,
                                                 "certificate-authority": str(ca)}}],
        "users": [{"name": f"{name}-admin", "user": {"client-certificate": str(cert),
                                                     "client-key": str(key)}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin"}}],
        "current-context": name,
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False))
