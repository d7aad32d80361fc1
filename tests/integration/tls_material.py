"""A small certificate authority for the TLS tests: real certificates, made fresh for each run.

The operator's TLS settings (``spec.tls.ca``, ``clientCertificate``) were only unit-tested; these
certificates let a real Connect worker serve ``https://`` (and demand client certificates), so
each failure a user meets is met for real: a CA that did not sign the worker's certificate, a
certificate for another host, an expired one, no client certificate. Java reads the worker's
keystore as PKCS12 written here; its truststore is written by the JDK's own ``keytool`` (Java
trusts a PKCS12 certificate entry only with an Oracle-specific attribute that keytool adds).
"""

from __future__ import annotations

import datetime
import ipaddress
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["STORE_PASSWORD", "Authority", "Issued"]

#: Password of the worker's keystore and truststore files (test material, never a real secret).
STORE_PASSWORD = "connect-offsets-test"

_NOW = datetime.datetime.now(datetime.UTC)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem(certificate: x509.Certificate) -> str:
    return certificate.public_bytes(serialization.Encoding.PEM).decode()


@dataclass(frozen=True)
class Issued:
    """A key and the certificate the authority signed for it."""

    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    @property
    def cert_pem(self) -> str:
        return _pem(self.certificate)

    @property
    def key_pem(self) -> str:
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()

    def write_keystore(self, path: Path, chain: list[x509.Certificate]) -> Path:
        """A PKCS12 keystore holding this key and certificate (and the chain above it)."""
        data = pkcs12.serialize_key_and_certificates(
            b"worker",
            self.key,
            self.certificate,
            chain,
            serialization.BestAvailableEncryption(STORE_PASSWORD.encode()),
        )
        path.write_bytes(data)
        return path


class Authority:
    """A self-signed CA that issues server and client certificates."""

    def __init__(self, common_name: str) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(_name(common_name))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_NOW - datetime.timedelta(days=1))
            .not_valid_after(_NOW + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
            .sign(self.key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> str:
        return _pem(self.certificate)

    def issue(
        self,
        common_name: str,
        *,
        ip_addresses: tuple[str, ...] = (),
        dns_names: tuple[str, ...] = (),
        client: bool = False,
        expired: bool = False,
    ) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        if expired:
            not_before, not_after = _NOW - datetime.timedelta(days=10), _NOW - datetime.timedelta(days=1)
        else:
            not_before, not_after = _NOW - datetime.timedelta(days=1), _NOW + datetime.timedelta(days=30)
        names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
        names += [x509.DNSName(dns) for dns in dns_names]
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH]),
                critical=False,
            )
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return Issued(key, builder.sign(self.key, hashes.SHA256()))

    def write_truststore(self, path: Path) -> Path:
        """A PKCS12 truststore trusting this CA, written by keytool so that Java trusts it."""
        pem = path.with_suffix(".pem")
        pem.write_text(self.cert_pem)
        path.unlink(missing_ok=True)
        subprocess.run(
            [
                "keytool",
                "-importcert",
                "-noprompt",
                "-alias",
                "ca",
                "-file",
                str(pem),
                "-keystore",
                str(path),
                "-storetype",
                "PKCS12",
                "-storepass",
                STORE_PASSWORD,
            ],
            check=True,
            capture_output=True,
        )
        return path
