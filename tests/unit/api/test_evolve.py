"""``evolve`` makes exactly the object ``dataclasses.replace`` makes, faster where it may, else through it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.api.evolve import _plan, evolve
from kubesched.api.objects import Pod
from kubesched.testing.builders import make_node, make_pod


@st.composite
def pods(draw: st.DrawFn) -> Pod:
    pod = make_pod(draw(st.sampled_from(["a", "b"]))).label("app", draw(st.sampled_from(["x", "y"])))
    if draw(st.booleans()):
        pod = pod.req(cpu=draw(st.sampled_from(["100m", "2"])))
    if draw(st.booleans()):
        pod = pod.toleration(key="k", operator="Exists", effect="NoSchedule")
    if draw(st.booleans()):
        pod = pod.nominated("n9")
    return pod.obj()


@settings(max_examples=60, deadline=None)
@given(pods(), st.sampled_from(["", "n1", "node-2"]))
def test_evolve_is_replace_for_pods(pod: Pod, node: str) -> None:
    before = pod.spec.node_name
    expected = dataclasses.replace(pod, spec=dataclasses.replace(pod.spec, node_name=node))
    got = evolve(pod, spec=evolve(pod.spec, node_name=node))
    assert got == expected
    assert type(got) is type(expected) and type(got.spec) is type(expected.spec)
    # A copy: the original is untouched, and unchanged fields are the very same objects, as with replace.
    assert pod.spec.node_name == before
    assert got.metadata is pod.metadata and got.spec.containers is pod.spec.containers


def test_pods_take_the_slot_copy() -> None:
    pod = make_pod("p").obj()
    assert _plan(type(pod)) is not None and _plan(type(pod.spec)) is not None


def test_evolve_other_api_objects() -> None:
    pod = make_pod("p").obj()
    node = make_node("n").obj()
    status = evolve(pod.status, nominated_node_name="n")
    assert status == dataclasses.replace(pod.status, nominated_node_name="n")
    assert evolve(node, metadata=node.metadata) == dataclasses.replace(node, metadata=node.metadata)


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: int
    b: int = 2


@dataclasses.dataclass(slots=True)
class Derived:
    a: int
    b: int = 0
    total: int = dataclasses.field(init=False, default=0)

    def __post_init__(self) -> None:
        self.total = self.a + self.b


@pytest.mark.parametrize(
    ("obj", "changes"),
    [
        pytest.param(Frozen(1), {"b": 5}, id="unslotted-frozen"),
        pytest.param(Derived(1, 2), {"b": 5}, id="post-init-recomputes"),
    ],
)
def test_classes_it_cannot_copy_go_through_replace(obj: Any, changes: dict[str, Any]) -> None:
    assert evolve(obj, **changes) == dataclasses.replace(obj, **changes)


def test_an_unknown_field_is_replaces_type_error() -> None:
    pod = make_pod("p").obj()
    with pytest.raises(TypeError):
        evolve(pod, no_such_field=1)
