"""Manifests kept as compact JSON bytes, decoded again when read.

Who calls it: :class:`~kubesched.api.objects.Pod`, which keeps its whole manifest for the few readers that need
more than the parsed fields (the policy input, the cluster agent's bind, the hub's change check); and
:func:`canonical` the policy cache's keys (:func:`kubesched.policyapi.contract.projection`). A decoded
manifest held as nested dicts costs about four times its JSON (2.1 KB against 0.3 KB for a scheduler_perf pod),
and a cluster holds tens of thousands of pods, each read this way a few times at most, and packing
and unpacking cost little next to that memory.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from typing import Any

import orjson

from kubesched.api import jsonwire

__all__ = ["canonical", "pack", "unpack"]

_OPTIONS = orjson.OPT_NON_STR_KEYS


def _text(value: Any) -> str:
    return value.isoformat() if isinstance(value, datetime.date | datetime.time) else str(value)


def pack(obj: Mapping[str, Any]) -> bytes:
    """``obj`` as compact JSON (:func:`kubesched.api.jsonwire.dumps`); dates YAML parsed and other values JSON has
    no form for are written as text, dates in ISO 8601."""
    # orjson hands back its whole write buffer (1 KB at least); a copy holds only the bytes.
    return bytes(memoryview(jsonwire.dumps(obj, default=_text)))


def unpack(data: bytes) -> dict[str, Any]:
    """The manifest :func:`pack` packed, as new dicts and lists (the caller may change them)."""
    decoded: dict[str, Any] = jsonwire.loads(data)
    return decoded


def canonical(value: Any) -> str:
    """``value`` as canonical JSON (keys sorted, no spaces): equal values give equal text. Values JSON has no form
    for are written as text, as :func:`pack` writes them."""
    try:
        return orjson.dumps(value, option=_OPTIONS | orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return json.dumps(value, default=_text, sort_keys=True, separators=(",", ":"))
