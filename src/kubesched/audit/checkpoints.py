"""Signed checkpoints of an audit log: the sidecar file ``<log>.checkpoints``, its format, signing and reading.

Written by :class:`kubesched.audit.sinks.jsonl.JsonlSink` (through :class:`CheckpointWriter`) when it is given a
signing key; read by :func:`kubesched.audit.verify.verify_chain` (through :func:`read_checkpoints`).

The chain (:mod:`kubesched.audit.chain`) is unkeyed: whoever can write the log can rewrite it from any line on and
recompute every hash, and the head file beside it too. A checkpoint is the writer's signed statement "the log had
``records`` records, the last hashing to ``hash``, at ``time``", made with an Ed25519 key the log's readers and
writers of the disk do not hold, so a rewritten chain no longer matches what was signed. One JSON line each::

    {"schema": "kubesched.io/audit/checkpoint/v1", "records": 1000, "hash": "<64 hex>",
     "time": "2026-03-01T12:00:00.000000Z", "key_id": "<16 hex>", "signature": "<base64>"}

``signature`` is Ed25519 over the canonical JSON (:func:`kubesched.audit.chain.canonical`) of ``{"hash",
"records", "schema", "time"}``; the schema in the signed bytes keeps a checkpoint signature from being mistaken
for anything else the key might sign. ``key_id`` is :func:`kubesched.audit.keys.key_id` of the signer, so a
verifier with the wrong public key can say so. Lines are appended in order, each after the log itself was synced
(so a checkpoint never vouches for records the disk has not confirmed) and synced in turn; ``records`` never
decreases from one line to the next (a writer restarted mid-step may repeat one). A last line without its newline
is a checkpoint a crash interrupted: the writer cuts it off when it reopens the file, the verifier ignores it.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from kubesched.audit.chain import AuditLogError, Head, canonical, is_hash
from kubesched.audit.keys import key_id
from kubesched.audit.records import parse_rfc3339, rfc3339

SCHEMA = "kubesched.io/audit/checkpoint/v1"
SUFFIX = ".checkpoints"
DEFAULT_EVERY = 1000

_KEY_ID = re.compile(r"^[0-9a-f]{16}$")
_FIELDS = ("schema", "records", "hash", "time", "key_id", "signature")


class CheckpointError(AuditLogError):
    """A checkpoints file cannot be read or one of its lines is not a checkpoint: names the file and line."""


def checkpoints_path(log_path: str | Path) -> Path:
    path = Path(log_path)
    return path.with_name(path.name + SUFFIX)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    records: int
    hash: str
    time: str
    key_id: str
    signature: bytes

    @property
    def head(self) -> Head:
        return Head(self.records, self.hash)

    def signed_bytes(self) -> bytes:
        return signed_bytes(self.records, self.hash, self.time)

    def verifies(self, public: Ed25519PublicKey) -> bool:
        try:
            public.verify(self.signature, self.signed_bytes())
        except InvalidSignature:
            return False
        return True

    def to_line(self) -> bytes:
        obj = {
            "schema": SCHEMA,
            "records": self.records,
            "hash": self.hash,
            "time": self.time,
            "key_id": self.key_id,
            "signature": base64.b64encode(self.signature).decode("ascii"),
        }
        return json.dumps(obj, separators=(",", ":")).encode("ascii") + b"\n"


def signed_bytes(records: int, last_hash: str, time: str) -> bytes:
    return canonical({"schema": SCHEMA, "records": records, "hash": last_hash, "time": time})


def sign(key: Ed25519PrivateKey, head: Head, now: float) -> Checkpoint:
    stamp = rfc3339(now)
    signature = key.sign(signed_bytes(head.records, head.hash, stamp))
    return Checkpoint(head.records, head.hash, stamp, key_id(key.public_key()), signature)


def parse_line(raw: bytes, where: str) -> Checkpoint:
    """One line of a checkpoints file; CheckpointError starting with ``where`` (file and line) otherwise."""
    try:
        obj: Any = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{where}: not a checkpoint: {'an empty line' if not raw.strip() else exc}") from None
    if not isinstance(obj, dict):
        raise CheckpointError(f"{where}: not a checkpoint: expected a JSON object")
    missing = [name for name in _FIELDS if name not in obj]
    if missing:
        raise CheckpointError(f"{where}: not a checkpoint: missing {', '.join(missing)}")
    if obj["schema"] != SCHEMA:
        raise CheckpointError(f"{where}: schema: expected {SCHEMA!r}, got {obj['schema']!r}")
    records = obj["records"]
    if not isinstance(records, int) or isinstance(records, bool) or records < 0:
        raise CheckpointError(f"{where}: records: must be a whole number ≥ 0")
    if not is_hash(obj["hash"]):
        raise CheckpointError(f"{where}: hash: must be 64 lower-case hex digits")
    stamp = obj["time"]
    try:
        if not isinstance(stamp, str):
            raise ValueError("not a string")
        parse_rfc3339(stamp)
    except ValueError as exc:
        raise CheckpointError(f"{where}: time: not an RFC 3339 timestamp ({exc})") from None
    if not isinstance(obj["key_id"], str) or not _KEY_ID.match(obj["key_id"]):
        raise CheckpointError(f"{where}: key_id: must be 16 lower-case hex digits")
    try:
        signature = base64.b64decode(str(obj["signature"]), validate=True)
    except (binascii.Error, ValueError):
        raise CheckpointError(f"{where}: signature: not base64") from None
    return Checkpoint(records, str(obj["hash"]), stamp, str(obj["key_id"]), signature)


@dataclass(frozen=True, slots=True)
class CheckpointFile:
    """What a checkpoints file holds: (line number, checkpoint) in file order, and whether its tail was torn."""

    path: Path
    checkpoints: tuple[tuple[int, Checkpoint], ...]
    torn_tail: bool


def read_checkpoints(log_path: str | Path) -> CheckpointFile | None:
    """The checkpoints of ``log_path``; None when it has no checkpoints file; CheckpointError for a bad line."""
    path = checkpoints_path(log_path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read the checkpoints file: {exc.strerror or exc}") from None
    lines = data.splitlines(keepends=True)
    torn = bool(lines) and not lines[-1].endswith(b"\n")
    if torn:
        lines.pop()
    found = tuple((number, parse_line(raw, f"{path}: line {number}")) for number, raw in enumerate(lines, 1))
    return CheckpointFile(path, found, torn)


class CheckpointWriter:
    """Appends signed checkpoints to ``<log>.checkpoints``; used by the audit log's writer thread only.

    Opening it creates the file if needed (so that, once signing is on, a missing file means a deleted one) and
    cuts off a torn last line. ``last`` is the newest checkpoint in the file (None if none), whoever signed it.
    """

    def __init__(self, log_path: Path, key: Ed25519PrivateKey, *, fsync: bool, clock: Callable[[], float]):
        self.path = checkpoints_path(log_path)
        self.key = key
        self.key_id = key_id(key.public_key())
        self._fsync = fsync
        self._clock = clock
        flags = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC
        try:
            try:
                self._fd = os.open(self.path, flags | os.O_CREAT | os.O_EXCL, 0o640)
                created = True
            except FileExistsError:
                self._fd = os.open(self.path, flags)
                created = False
        except OSError as exc:
            raise CheckpointError(f"{self.path}: cannot open the checkpoints file: {exc.strerror or exc}") from None
        try:
            if created and fsync:
                # The file's name must be durable too, or a crash could lose every checkpoint at once.
                try:
                    _fsync_directory(self.path)
                except OSError as exc:
                    raise CheckpointError(f"{self.path}: cannot sync its directory: {exc.strerror or exc}") from None
            self.last = self._recover()
        except BaseException:
            os.close(self._fd)
            raise

    def _recover(self) -> Checkpoint | None:
        try:
            with open(self.path, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise CheckpointError(f"{self.path}: cannot read the checkpoints file: {exc.strerror or exc}") from None
        if data and not data.endswith(b"\n"):
            # A checkpoint a crash interrupted: it was never complete, so it vouched for nothing.
            keep = data.rfind(b"\n") + 1
            try:
                os.ftruncate(self._fd, keep)
            except OSError as exc:
                raise CheckpointError(f"{self.path}: cannot cut off a torn last line: {exc.strerror or exc}") from None
            data = data[:keep]
        lines = data.splitlines()
        if not lines:
            return None
        return parse_line(lines[-1], f"{self.path}: line {len(lines)}")

    def append(self, head: Head) -> Checkpoint:
        """Sign ``head`` now and append it (and fsync, unless told not to); OSError if the disk refuses."""
        checkpoint = sign(self.key, head, self._clock())
        data = checkpoint.to_line()
        written = 0
        try:
            while written < len(data):
                written += os.write(self._fd, data[written:])
            if self._fsync:
                os.fsync(self._fd)
        except OSError:
            if written:
                # Never leave a torn line for the next checkpoint to be glued onto.
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, os.fstat(self._fd).st_size - written)
            raise
        self.last = checkpoint
        return checkpoint

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


def _fsync_directory(path: Path) -> None:
    fd = os.open(path.parent if str(path.parent) else Path("."), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
