"""JSON on the wire through orjson, with the standard library's answer wherever orjson would give another.

Who calls it: the reflector (:mod:`kubesched.backends.kube.reflector`, each watch event), the cluster agent's HTTPS
endpoints (:mod:`kubesched.agent.server`) and the hub's agent client (:mod:`kubesched.federation.agent_client`):
every placed pod crosses these a few times, and orjson encodes and decodes them 5-10 times faster than the
standard library. The results are the standard library's: :func:`dumps` writes compact JSON and falls back to
``json`` for what orjson will not write (integers past 64 bits, keys that are not strings, non-finite floats,
which orjson would turn into ``null``); :func:`loads` leaves to ``json`` what orjson would read otherwise
(integers past 64 bits, which orjson makes floats) or not at all (NaN, text not in UTF-8), and raises
``ValueError`` where ``json`` does.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import orjson

__all__ = ["dumps", "loads"]


def _finite(value: Any) -> bool:
    """Whether ``value`` holds no NaN or infinity (which json writes as such and orjson as null)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(item) for item in value.values())
    if isinstance(value, list | tuple):
        return all(_finite(item) for item in value)
    return True


def dumps(value: Any, *, default: Callable[[Any], Any] | None = None) -> bytes:
    """``value`` as compact JSON (``json.dumps(value, separators=(",", ":"), default=default)``'s value)."""
    try:
        encoded = orjson.dumps(value, default=default)
    except TypeError:  # orjson.JSONEncodeError: an integer past 64 bits, a key that is not a string, ...
        return json.dumps(value, separators=(",", ":"), default=default).encode()
    if b"null" in encoded and not _finite(value):
        return json.dumps(value, separators=(",", ":"), default=default).encode()
    return encoded


# orjson reads an integer past 64 bits as a float, silently; the standard library reads it exactly. Such an integer
# has 19 digits at least, so a text with no 19 digits in a row (in a string or a number) is left to orjson. The run
# is found by mapping every digit to "0" and every other byte to " ", a byte translation much cheaper than a regular
# expression over the text.
_DIGITS_ONLY = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_RUN = b"0" * 19


def loads(data: bytes) -> Any:
    """The value ``data`` holds, as ``json.loads`` reads it; ``ValueError`` when it is not JSON."""
    if data.translate(_DIGITS_ONLY).find(_LONG_RUN) >= 0:
        return json.loads(data)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:  # what the standard library may still read (NaN, UTF-16, ...), or not JSON
        return json.loads(data)
