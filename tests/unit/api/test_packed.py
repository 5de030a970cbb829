"""Packed manifests: what goes in comes back out (integers past 64 bits too), values JSON lacks are written as
text, and a pod's manifest is
held as its compact JSON alone (not orjson's whole write buffer)."""

from __future__ import annotations

import datetime
import sys
from typing import Any

import pytest

from kubesched.api.objects import Pod
from kubesched.api.packed import canonical, pack, unpack


@pytest.mark.parametrize(
    ("obj", "back"),
    [
        pytest.param({"a": [1, 2.5, None, True, "x"]}, {"a": [1, 2.5, None, True, "x"]}, id="json-values"),
        pytest.param({"s": "ünïcode ✓"}, {"s": "ünïcode ✓"}, id="unicode"),
        pytest.param({1: "one"}, {"1": "one"}, id="a-non-string-key-as-text"),
        pytest.param(
            {"t": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)},
            {"t": "2026-01-02T03:04:05+00:00"},
            id="a-yaml-timestamp-as-text",
        ),
        pytest.param({"n": 2**70, "d": datetime.date(2026, 1, 2)}, {"n": 2**70, "d": "2026-01-02"}, id="big-integer"),
    ],
)
def test_what_is_packed_is_read_back(obj: dict[Any, Any], back: dict[str, Any]) -> None:
    assert unpack(pack(obj)) == back


def test_the_packed_bytes_are_held_without_slack() -> None:
    packed = pack({"metadata": {"name": "p"}})
    assert sys.getsizeof(packed) - len(packed) < 64


def test_a_pods_raw_is_its_manifest_and_changing_it_changes_nothing() -> None:
    manifest = {"metadata": {"name": "p", "labels": {"app": "web"}}, "spec": {"containers": [{"name": "c"}]}}
    pod = Pod.from_dict(manifest, "pod p")
    assert pod.raw == manifest
    pod.raw["metadata"]["labels"]["app"] = "changed"
    assert pod.raw["metadata"]["labels"] == {"app": "web"}


@pytest.mark.parametrize(
    ("left", "right"),
    [
        pytest.param({"b": 1, "a": [1, {"d": 2, "c": 3}]}, {"a": [1, {"c": 3, "d": 2}], "b": 1}, id="key-order"),
        pytest.param({"n": 2**70, "a": 1}, {"a": 1, "n": 2**70}, id="big-integers-too"),
    ],
)
def test_canonical_text_is_equal_for_equal_values(left: dict[str, Any], right: dict[str, Any]) -> None:
    assert canonical(left) == canonical(right)
    assert canonical(left) != canonical({**left, "extra": None})
