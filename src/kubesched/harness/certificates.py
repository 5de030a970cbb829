"""Throwaway TLS material for test servers: a CA with a serving certificate, and a service-account signing key.

Who calls it: :mod:`kubesched.harness.envtest` (kube-apiserver's serving certificate and service-account key
pair), ``kubesched bench``'s cross-cluster shapes (their agents' serving certificate) and the TLS tests of the
remote OPA engine (a serving certificate for the OPA test server). Everything is valid for a day, for
``localhost`` and ``127.0.0.1`` only, and written unencrypted: never use it for anything real.

It needs the ``cryptography`` package, a runtime dependency of kubesched since audit checkpoints are signed
(:mod:`kubesched.audit.keys`); it is still imported only when a function is called, so importing this module
stays cheap, and a clear error remains for an installation that lacks it.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path
from typing import Literal

__all__ = ["write_server_certificates", "write_signing_key"]


def _require_cryptography() -> None:
    try:
        import cryptography  # noqa: F401
    except ImportError as error:
        raise RuntimeError(
            "kubesched.harness.certificates needs the cryptography package: pip install cryptography"
        ) from error


def write_server_certificates(directory: Path, common_name: str = "localhost") -> tuple[Path, Path, Path]:
    """Write a self-signed CA and a serving certificate it signed into ``directory``.

    Both keys are EC P-256. The serving certificate names ``common_name`` and has the subject alternative
    names ``localhost`` and ``127.0.0.1`` and the extended key usage serverAuth. Returns the paths of the CA
    certificate (``ca.pem``: the bundle clients trust), the serving certificate (``tls.crt``) and its PKCS#8
    private key (``tls.key``).
    """
    _require_cryptography()
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubesched test CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
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
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.IPv4Address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    ca_file, cert_file, key_file = directory / "ca.pem", directory / "tls.crt", directory / "tls.key"
    ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_file.chmod(0o600)
    return ca_file, cert_file, key_file


def write_signing_key(path: Path, kind: Literal["ec", "rsa"] = "ec") -> Path:
    """Write an unencrypted private key PEM to ``path`` and return ``path``.

    ``"ec"`` is P-256 (kube-apiserver then signs service-account tokens with ES256), ``"rsa"`` is 2048-bit RSA
    (RS256). kube-apiserver takes the same file for ``--service-account-signing-key-file`` and
    ``--service-account-key-file`` (it derives the public key to verify with from the private one). The key is
    in the traditional format (``EC PRIVATE KEY``, SEC 1; ``RSA PRIVATE KEY``, PKCS#1): kube-apiserver's
    ``--service-account-key-file`` reads no PKCS#8 EC keys ("data does not contain any valid RSA or ECDSA
    public keys").
    """
    _require_cryptography()
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
    if kind == "ec":
        key = ec.generate_private_key(ec.SECP256R1())
    elif kind == "rsa":
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    else:
        raise ValueError(f"unknown signing key kind {kind!r}: 'ec' or 'rsa'")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )
    )
    path.chmod(0o600)
    return path
