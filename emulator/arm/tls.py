"""A throwaway certificate authority and server certificate for the HTTPS management port.

Generated at every start with ``cryptography`` (a development dependency; the plain-HTTP port needs
nothing beyond the standard library): a CA certificate written to ``ca_file`` for clients to verify
against (``connection_verify=<ca_file>`` in azure-core, ``REQUESTS_CA_BUNDLE``, ``curl --cacert``), and a
server certificate for ``localhost``, ``127.0.0.1``, ``::1`` and the listening host, signed by it. The
private keys never touch the disk except for a moment in a private temporary directory, because
``ssl.SSLContext.load_cert_chain`` only reads files.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

CA_FILE_NAME = "management-ca.pem"


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
    """Generate a CA and a server certificate, write the CA to ``ca_file`` and return a server context."""
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
        .not_valid_after(now + timedelta(days=365))
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
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(_names(host)), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    ca_file.parent.mkdir(parents=True, exist_ok=True)
    ca_file.write_bytes(ca_cert.public_bytes(pem))
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
