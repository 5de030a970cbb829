"""JSON on the wire through orjson gives the standard library's results: the same values read, the same values
written (integers past 64 bits, NaN, keys that are not strings included), the same error for what is not JSON."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from kubesched.api import jsonwire

TEXTS = [
    pytest.param(b'{"a":[1,2.5,null,true,"x"],"b":{}}', id="json-values"),
    pytest.param('{"s":"ünïcode ✓"}'.encode(), id="unicode"),
    pytest.param(b'{"n":123456789012345678901234}', id="an-integer-past-64-bits-stays-exact"),
    pytest.param(b'{"n":-9223372036854775809}', id="a-negative-integer-past-64-bits-stays-exact"),
    pytest.param(b'{"n":18446744073709551615}', id="the-largest-unsigned-64-bit-integer"),
    pytest.param(b'{"uid":"1234567890123456789012"}', id="a-long-digit-string"),
    pytest.param(b'{"f":NaN,"g":-Infinity}', id="nan-and-infinity"),
    pytest.param('{"s":"x"}'.encode("utf-16"), id="utf-16"),
]


@pytest.mark.parametrize("text", TEXTS)
def test_loads_reads_what_the_standard_library_reads(text: bytes) -> None:
    ours, theirs = jsonwire.loads(text), json.loads(text)
    assert repr(ours) == repr(theirs)  # repr: 1e23 and 10**23 are ==, NaN is not == itself


VALUES = [
    pytest.param({"a": [1, 2.5, None, True, "x"], "t": (1, 2)}, id="json-values"),
    pytest.param({"n": 2**70, "m": -(2**64)}, id="integers-past-64-bits"),
    pytest.param({1: "one", None: "none"}, id="keys-that-are-not-strings"),
    pytest.param({"f": math.nan, "g": [math.inf], "z": None}, id="nan-and-infinity-not-null"),
    pytest.param({"s": "ünïcode ✓\u2028"}, id="unicode"),
]


@pytest.mark.parametrize("value", VALUES)
def test_dumps_writes_what_the_standard_library_writes(value: Any) -> None:
    ours = jsonwire.dumps(value)
    theirs = json.dumps(value, separators=(",", ":"))
    assert repr(json.loads(ours)) == repr(json.loads(theirs))
    assert b": " not in ours and b", " not in ours  # compact


def test_dumps_hands_what_json_lacks_to_default() -> None:
    class Opaque:
        def __str__(self) -> str:
            return "opaque"

    assert json.loads(jsonwire.dumps({"o": Opaque()}, default=str)) == {"o": "opaque"}
    with pytest.raises(TypeError):
        jsonwire.dumps({"o": Opaque()})


@pytest.mark.parametrize("text", [b"", b"{", b'{"a":}', b"\xff\xfe\x00"], ids=["empty", "cut", "no-value", "not-text"])
def test_what_is_not_json_is_a_value_error(text: bytes) -> None:
    with pytest.raises(ValueError):
        jsonwire.loads(text)
