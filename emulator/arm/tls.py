"""A development certificate authority and server certificate for the HTTPS management port.

Made with ``cryptography`` (a development dependency; the plain-HTTP port needs nothing beyond the
standard library): a CA certificate at ``ca_file`` for clients to verify against
(``connection_verify=<ca_file>`` in azure-core, ``REQUESTS_CA_BUNDLE`` / ``SSL_CERT_FILE``,
``curl --cacert``), and a server certificate for ``localhost``, ``127.0.0.1``, ``::1`` and the listening
host, signed by it.

The CA is kept: its certificate and its private key (``management-ca.key`` beside it, owner-readable only)
are reused at the next start while the certificate has more than ``CA_RENEW_BEFORE`` left, so a client
told once to trust the CA file (an exported ``REQUESTS_CA_BUNDLE``) keeps working across restarts of
``make run``. A missing, unreadable or mismatched pair is replaced by a new one. The server certificate is
new at every start; its private key touches the disk only for a moment in a private temporary directory,
because ``ssl.SSLContext.load_cert_chain`` only reads files.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import ssl
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CA_FILE_NAME = "management-ca.pem"
CA_KEY_FILE_NAME = "management-ca.key"
CA_LIFETIME = timedelta(days=365)
CA_RENEW_BEFORE = timedelta(days=30)


@dataclass(frozen=True, slots=True)
class TlsMaterial:
    ca_file: Path
    context: ssl.SSLContext


def _names(host: str) -> list[Any]:
    from cryptography import x509

    names: list[Any] = [x509.DNSName("localhost")]
    addresses = {"127.0.0.1", "::1"}
    if host and host not in ("0.0.0.0", "::"):
        try:
            addresses.add(str(ipaddress.ip_address(host)))
        except ValueError:
            if host != "localhost":
                names.append(x509.DNSName(host))
    names += [x509.IPAddress(ipaddress.ip_address(a)) for a in sorted(addresses)]
    return names


def create_tls(ca_file: Path, host: str = "127.0.0.1") -> TlsMaterial:
    """The CA at ``ca_file`` (kept from an earlier start, else made and written there) and a server
    context whose certificate, new at every call, it signs."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError(
            "HTTPS on the management port needs the 'cryptography' package (pip install cryptography)"
        ) from exc

    now = datetime.now(UTC)
    key_file = ca_file.with_name(CA_KEY_FILE_NAME)
    ca_cert, ca_key = _kept_ca(ca_file, key_file, now) or _new_ca(ca_file, key_file, now)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_cert.subject)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(min(now + timedelta(days=365), ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(_names(host)), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    with tempfile.TemporaryDirectory(prefix="busbar-tls-") as private:
        cert_path = os.path.join(private, "server.pem")
        key_path = os.path.join(private, "server.key")
        with open(cert_path, "wb") as handle:
            handle.write(server_cert.public_bytes(pem) + ca_cert.public_bytes(pem))
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(
                server_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
            )
        context.load_cert_chain(cert_path, key_path)
    return TlsMaterial(ca_file, context)


def _kept_ca(ca_file: Path, key_file: Path, now: datetime) -> tuple[Any, Any] | None:
    """The CA written by an earlier start, if both files read, belong together and stay valid a while."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        ca_cert = x509.load_pem_x509_certificate(ca_file.read_bytes())
        ca_key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
    except (OSError, ValueError):
        return None
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey) or ca_key.public_key() != ca_cert.public_key():
        log.warning("%s does not match %s: making a new management CA", key_file, ca_file)
        return None
    if ca_cert.not_valid_after_utc - now < CA_RENEW_BEFORE:
        log.info("the management CA in %s expires soon: making a new one", ca_file)
        return None
    return ca_cert, ca_key


def _new_ca(ca_file: Path, key_file: Path, now: datetime) -> tuple[Any, Any]:
    """A new CA, its certificate written to ``ca_file`` and its key to ``key_file`` (owner-only)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Busbar"),
            x509.NameAttribute(NameOID.COMMON_NAME, "Busbar emulator development CA"),
        ]
    )
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + CA_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    ca_file.parent.mkdir(parents=True, exist_ok=True)
    # The key first, then the certificate: a crash in between leaves a pair the next start replaces.
    partial = key_file.with_name(f".{key_file.name}.tmp")
    partial.unlink(missing_ok=True)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        private_format = serialization.PrivateFormat.PKCS8
        handle.write(ca_key.private_bytes(pem, private_format, serialization.NoEncryption()))
    partial.replace(key_file)
    ca_file.write_bytes(ca_cert.public_bytes(pem))
    return ca_cert, ca_key
