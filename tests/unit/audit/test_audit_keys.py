"""Key files for signed checkpoints: every accepted encoding reads back the same key; anything else is one line
naming the file."""

from __future__ import annotations

import base64
import hashlib
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kubesched.audit.keys import KeyFileError, key_id, load_public_key, load_signing_key, write_key_pair

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
SEED = bytes(range(32))
PUBLIC_RAW = KEY.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def raw_public(path: Path) -> bytes:
    return load_public_key(path).public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(
            KEY.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ),
            id="pem-pkcs8",
        ),
        pytest.param(
            KEY.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
            ),
            id="openssh",
        ),
        pytest.param(SEED, id="raw-32-bytes"),
        pytest.param(SEED.hex().encode() + b"\n", id="hex"),
        pytest.param(base64.b64encode(SEED) + b"\n", id="base64-as-from-literal-secrets-hold-it"),
    ],
)
def test_signing_key_encodings(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "key"
    path.write_bytes(content)
    key = load_signing_key(path)
    assert key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw) == PUBLIC_RAW


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(
            KEY.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
            id="pem",
        ),
        pytest.param(
            KEY.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
            + b" me@example\n",
            id="ssh-ed25519",
        ),
        pytest.param(PUBLIC_RAW, id="raw-32-bytes"),
        pytest.param(PUBLIC_RAW.hex().encode(), id="hex"),
        pytest.param(base64.b64encode(PUBLIC_RAW), id="base64"),
    ],
)
def test_public_key_encodings(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "key.pub"
    path.write_bytes(content)
    assert raw_public(path) == PUBLIC_RAW


def test_key_id_is_the_start_of_the_sha256_of_the_raw_public_key() -> None:
    assert key_id(KEY.public_key()) == hashlib.sha256(PUBLIC_RAW).hexdigest()[:16]


def other_pem(private: bool) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    if private:
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


PKCS8 = KEY.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
PUBLIC_PEM = KEY.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


@pytest.mark.parametrize(
    ("loader", "content", "message"),
    [
        pytest.param(load_signing_key, None, "cannot read the signing key: No such file", id="private-missing"),
        pytest.param(load_signing_key, b"hello\n", "not an Ed25519 private key", id="private-garbage"),
        pytest.param(load_signing_key, b"\x00" * 31, "not an Ed25519 private key", id="private-31-bytes"),
        pytest.param(load_signing_key, other_pem(True), "the signing key is an ECDSA key, not Ed25519", id="ec"),
        pytest.param(
            load_signing_key,
            KEY.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.BestAvailableEncryption(b"secret"),
            ),
            "the signing key is encrypted",
            id="encrypted",
        ),
        pytest.param(load_signing_key, PUBLIC_PEM, "this is a public key; --audit-signing-key", id="public-as-private"),
        pytest.param(load_signing_key, PKCS8[:60], "not a readable PEM private key", id="private-pem-cut-short"),
        pytest.param(load_public_key, None, "cannot read the public key: No such file", id="public-missing"),
        pytest.param(load_public_key, b"ssh-rsa AAAA\n", "not a readable public key", id="public-ssh-garbage"),
        pytest.param(load_public_key, other_pem(False), "the public key is an ECDSA key, not Ed25519", id="public-ec"),
        pytest.param(load_public_key, PKCS8, "this is a private key; --public-key takes", id="private-as-public"),
        pytest.param(load_public_key, b"\x01" * 40, "not an Ed25519 public key", id="public-40-bytes"),
    ],
)
def test_bad_key_files_are_one_line_naming_the_file(
    tmp_path: Path, loader: Callable[[Path], object], content: bytes | None, message: str
) -> None:
    path = tmp_path / "key"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(KeyFileError) as raised:
        loader(path)
    text = str(raised.value)
    assert text.startswith(f"{path}: ") and message in text and "\n" not in text, text


def test_write_key_pair(tmp_path: Path) -> None:
    private, public = tmp_path / "k.pem", tmp_path / "k.pub"
    key = write_key_pair(private, public)
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert raw_public(public) == key.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    assert load_signing_key(private).private_bytes_raw() == key.private_bytes_raw()
    before = private.read_bytes(), public.read_bytes()
    with pytest.raises(KeyFileError, match="already exists; not overwriting a key"):
        write_key_pair(private, tmp_path / "new.pub")
    assert not (tmp_path / "new.pub").exists(), "no public key without its private key"
    assert (private.read_bytes(), public.read_bytes()) == before
