"""TLS contexts from PEM material, with errors that name the file and the field it came from.

Who uses it: the kube API client (a kubeconfig's ``certificate-authority[-data]``, ``client-certificate[-data]``,
``client-key[-data]``), the remote OPA client (``caFile``), the hub's agent clients (a MemberCluster's
``caBundle``) and ``kubesched agent`` (``--tls-cert``/``--tls-key``). A CA given is the only one trusted, as
client-go does; with none, the system's trust store. Python's ``ssl`` loads a certificate chain only from files,
so chains given as data are written to a private directory for the call and removed after it.
"""

from __future__ import annotations

import os
import shutil
import ssl
import tempfile
from dataclasses import dataclass

from kubesched.errors import KubeschedError

__all__ = ["Pem", "TlsError", "client_context", "server_context"]


class TlsError(KubeschedError):
    """PEM material that cannot be used; the message names where it came from."""


@dataclass(frozen=True, slots=True)
class Pem:
    """PEM material given as ``data`` or as the file at ``path``; ``field`` names it in errors (``caFile``,
    ``certificate-authority-data``, ``--tls-cert``)."""

    field: str
    data: bytes | None = None
    path: str | None = None

    def describe(self) -> str:
        return f"{self.field} {self.path}" if self.path is not None and self.data is None else self.field


def client_context(
    *, ca: Pem | None = None, client: tuple[Pem, Pem] | None = None, verify: bool = True, where: str = ""
) -> ssl.SSLContext:
    """A context for connecting to a server: trusting ``ca`` (else the system's store), presenting ``client`` (a
    certificate and its private key) when given; ``verify`` False checks neither the server's certificate nor its
    name. ``where`` prefixes every error (``kubeconfig /x (context y)``)."""
    prefix = f"{where}: " if where else ""
    if not verify:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif ca is not None:
        context = _trusting(ca, prefix)
    else:
        context = ssl.create_default_context()
    if client is not None:
        _load_chain(context, client[0], client[1], prefix)
    return context


def server_context(certificate: Pem, key: Pem, *, where: str = "") -> ssl.SSLContext:
    """A context for serving TLS 1.2 or later with ``certificate`` (its chain) and its private ``key``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_chain(context, certificate, key, f"{where}: " if where else "")
    return context


def _bytes(material: Pem, prefix: str) -> bytes:
    if material.data is not None:
        return material.data
    assert material.path is not None, f"{material.field}: neither data nor a path"
    try:
        with open(material.path, "rb") as handle:
            return handle.read()
    except OSError as error:
        raise TlsError(f"{prefix}{material.describe()}: {error.strerror or error}") from error


def _trusting(ca: Pem, prefix: str) -> ssl.SSLContext:
    try:
        text = _bytes(ca, prefix).decode("ascii")
    except UnicodeDecodeError:
        text = ""
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise TlsError(f"{prefix}{ca.describe()}: not a PEM certificate")
    try:
        return ssl.create_default_context(cadata=text)
    except (ssl.SSLError, ValueError) as error:
        raise TlsError(f"{prefix}{ca.describe()}: not a PEM certificate ({error})") from error


def _load_chain(context: ssl.SSLContext, certificate: Pem, key: Pem, prefix: str) -> None:
    # Each file read first, so that a missing one is named alone; ssl's own error would not say which.
    for material in (certificate, key):
        if material.data is None:
            _bytes(material, prefix)
    directory: str | None = None
    try:
        paths: list[str] = []
        for material, name in ((certificate, "tls.crt"), (key, "tls.key")):
            if material.data is None:
                assert material.path is not None
                paths.append(material.path)
                continue
            if directory is None:
                directory = tempfile.mkdtemp(prefix="kubesched-tls-")
            path = os.path.join(directory, name)
            with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as handle:
                handle.write(material.data)
            paths.append(path)
        context.load_cert_chain(paths[0], paths[1])
    except (ssl.SSLError, ValueError) as error:
        reason = getattr(error, "reason", None) or str(error)
        raise TlsError(
            f"{prefix}{certificate.describe()} / {key.describe()}: not a PEM certificate and its private key ({reason})"
        ) from error
    finally:
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
