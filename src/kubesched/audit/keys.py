"""Ed25519 key files for signed audit checkpoints: reading them, naming them, making a pair.

Used by the CLI: ``simulate``/``run --audit-signing-key`` load the private key
(:func:`load_signing_key`) and hand it to :class:`kubesched.audit.sinks.jsonl.JsonlSink`;
``audit verify|query --public-key`` load the public one (:func:`load_public_key`) for
:func:`kubesched.audit.verify.verify_chain`; ``audit keygen`` writes a new pair (:func:`write_key_pair`).

Accepted encodings, so that a key can come from ``openssl``, ``ssh-keygen`` or a Kubernetes Secret made with
``--from-literal`` alike:

* private: PEM (PKCS#8 ``PRIVATE KEY``, as ``openssl genpkey -algorithm ed25519`` and ``audit keygen``
  write it; or ``OPENSSH PRIVATE KEY``, unencrypted), or the raw 32-byte seed as bytes, 64 hex digits
  or base64;
* public: PEM (``PUBLIC KEY``), an OpenSSH ``ssh-ed25519 AAAA...`` line, or the raw 32 bytes as bytes,
  hex or base64.

Any other content, an encrypted key, or a key of another algorithm is a :class:`KeyFileError` naming the
file. A key's id (:func:`key_id`) is the first 16 hex digits of the sha256 of its raw 32-byte public key;
checkpoints carry it so that a verifier holding the wrong key is told so, not just "bad signature".
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from kubesched.audit.chain import AuditLogError

RAW_KEY_SIZE = 32
KEY_ID_HEX = 16


class KeyFileError(AuditLogError):
    """A key file cannot be read or does not hold an Ed25519 key of the kind asked for."""


def key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:KEY_ID_HEX]


def load_signing_key(path: str | Path) -> Ed25519PrivateKey:
    """The Ed25519 private key in ``path``; KeyFileError (one line, naming the file) otherwise."""
    path = Path(path)
    data = _read(path, "signing key")
    if b"-----BEGIN" in data:
        try:
            if b"OPENSSH PRIVATE KEY" in data:
                key: object = serialization.load_ssh_private_key(data, password=None)
            else:
                key = serialization.load_pem_private_key(data, password=None)
        except TypeError:
            raise KeyFileError(f"{path}: the signing key is encrypted; give an unencrypted key") from None
        except (ValueError, UnsupportedAlgorithm) as exc:
            if b"PUBLIC KEY" in data or data.startswith(b"ssh-"):
                raise KeyFileError(f"{path}: this is a public key; --audit-signing-key needs the private key") from None
            raise KeyFileError(f"{path}: not a readable PEM private key ({_first_line(exc)})") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise KeyFileError(f"{path}: the signing key is {_kind(key)}, not Ed25519")
        return key
    raw = _raw(data)
    if raw is None:
        raise KeyFileError(
            f"{path}: not an Ed25519 private key (expected PEM, or 32 bytes raw, as hex or as base64; "
            "`kubesched audit keygen` makes one)"
        )
    return Ed25519PrivateKey.from_private_bytes(raw)


def load_public_key(path: str | Path) -> Ed25519PublicKey:
    """The Ed25519 public key in ``path``; KeyFileError (one line, naming the file) otherwise."""
    path = Path(path)
    data = _read(path, "public key")
    stripped = data.strip()
    if b"PRIVATE KEY-----" in data:
        raise KeyFileError(
            f"{path}: this is a private key; --public-key takes the public key (keep the private one secret)"
        )
    if b"-----BEGIN" in data or stripped.startswith(b"ssh-"):
        try:
            key: object = (
                serialization.load_ssh_public_key(stripped)
                if stripped.startswith(b"ssh-")
                else serialization.load_pem_public_key(data)
            )
        except (ValueError, UnsupportedAlgorithm) as exc:
            raise KeyFileError(f"{path}: not a readable public key ({_first_line(exc)})") from None
        if not isinstance(key, Ed25519PublicKey):
            raise KeyFileError(f"{path}: the public key is {_kind(key)}, not Ed25519")
        return key
    raw = _raw(data)
    if raw is None:
        raise KeyFileError(
            f"{path}: not an Ed25519 public key (expected PEM, ssh-ed25519, or 32 bytes raw, hex or base64)"
        )
    return Ed25519PublicKey.from_public_bytes(raw)


def write_key_pair(private_path: str | Path, public_path: str | Path) -> Ed25519PrivateKey:
    """Make a new key pair: PKCS#8 PEM private key (mode 0600) and PEM public key; never overwrites a file."""
    private_path, public_path = Path(private_path), Path(public_path)
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    # The public file first: if it cannot be made, no private key is left lying around.
    _create(public_path, public_pem, 0o644)
    try:
        _create(private_path, private_pem, 0o600)
    except KeyFileError:
        public_path.unlink(missing_ok=True)
        raise
    return key


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None


def _create(path: Path, data: bytes, mode: int) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    except FileExistsError:
        raise KeyFileError(f"{path}: already exists; not overwriting a key") from None
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot create the key file: {exc.strerror or exc}") from None
    try:
        os.write(fd, data)
        os.fsync(fd)
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot write the key file: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _raw(data: bytes) -> bytes | None:
    """32 key bytes given as themselves, as hex or as base64 (a Secret made with --from-literal is text)."""
    if len(data) == RAW_KEY_SIZE:
        return data
    text = data.strip()
    if len(text) == 2 * RAW_KEY_SIZE:
        try:
            return bytes.fromhex(text.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            return None
    try:
        decoded = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return decoded if len(decoded) == RAW_KEY_SIZE else None


def _kind(key: object) -> str:
    for kind, classes in _KINDS:
        if isinstance(key, classes):
            return kind
    return f"a {type(key).__name__.lstrip('_')}"


# No DSA entry: cryptography 51 deprecates DSA and warns on first use of its classes (a DSA key is then named by its
# class, "a DSAPrivateKey").
_KINDS: tuple[tuple[str, tuple[type, ...]], ...] = (
    ("an RSA key", (rsa.RSAPrivateKey, rsa.RSAPublicKey)),
    ("an ECDSA key", (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey)),
    ("an Ed448 key", (ed448.Ed448PrivateKey, ed448.Ed448PublicKey)),
)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
