"""PodMap behaves as the dict it replaced, order included, while copies share and then write its chunks; and
changes_since equals the difference of the two maps' item sets. Chunks of 3 make every path run."""

from __future__ import annotations

from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.framework import pod_map
from kubesched.framework.pod_map import PodMap
from kubesched.framework.types import PodInfo
from kubesched.testing.builders import make_pod

PODS = [PodInfo(make_pod(f"p{i}").uid(f"u{i}").obj()) for i in range(12)]
# (operation, uid index, which map: 0 = the latest copy, 1 = the one before it)
STEP = st.tuples(st.sampled_from(["put", "rewrap", "pop", "copy"]), st.integers(0, 11), st.integers(0, 1))


def _same(got: PodMap, want: dict[str, PodInfo]) -> None:
    assert list(got.items()) == list(want.items())
    assert list(got.values()) == list(want.values())
    assert list(got) == list(want) == list(got.keys())
    assert len(got) == len(want) and len(got.values()) == len(want)
    for pod in PODS:
        assert (pod.uid in got) == (pod.uid in want)
        assert got.get(pod.uid) is want.get(pod.uid)


@settings(max_examples=300, deadline=None)
@given(st.lists(STEP, max_size=60))
def test_pod_map_equals_a_dict_under_copies(steps: list[tuple[str, int, int]]) -> None:
    with mock.patch.object(pod_map, "CHUNK", 3):
        maps = [PodMap(), PodMap()]
        dicts: list[dict[str, PodInfo]] = [{}, {}]
        # The map before the last copy, to diff against (writes in between go in place where not shared).
        before_map, before_dict = maps[1], dicts[1]
        for op, index, which in steps:
            uid = PODS[index].uid
            target, reference = maps[which], dicts[which]
            if op == "put":
                target.put(uid, PODS[index])
                reference[uid] = PODS[index]
            elif op == "rewrap":
                # A new PodInfo for the same uid (an assumed pod confirmed): same place in the order.
                fresh = PodInfo(PODS[index].pod)
                target.put(uid, fresh)
                reference[uid] = fresh
            elif op == "pop":
                assert target.pop(uid) is reference.pop(uid, None)
            else:
                maps = [target.copy(), target]
                dicts = [dict(reference), reference]
                before_map, before_dict = target, reference
                continue
            for got, want in zip(maps, dicts, strict=True):
                _same(got, want)
            _same(before_map, before_dict)
            removed, added = maps[0].changes_since(before_map)
            assert removed == before_dict.items() - dicts[0].items()
            assert added == dicts[0].items() - before_dict.items()
