"""The per-node rejections of an attempt read exactly as the dict the node search used to fill: chunks added as
arrays, entries written between them, in order, later ones standing over earlier ones."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kubesched.framework.status import Code, Status
from kubesched.scheduler.diagnosis import RejectedNodes

STATUSES = [Status(Code.UNSCHEDULABLE, f"reason {i}") for i in range(3)]
NAMES = [f"n{i}" for i in range(6)]

# A chunk: (names, 1-based status ids); a write: (name, status index).
CHUNK = st.lists(st.tuples(st.sampled_from(NAMES), st.integers(1, 3)), max_size=4, unique_by=lambda item: item[0])
STEP = st.one_of(CHUNK.map(lambda chunk: ("chunk", chunk)), st.tuples(st.just("write"), st.sampled_from(NAMES)))


@given(st.lists(STEP, max_size=6), st.sampled_from(["items", "get", "len"]))
def test_rejections_read_as_the_dict_filled_in_the_same_order(steps: list[tuple[str, object]], read: str) -> None:
    lazy, plain = RejectedNodes(), dict[str, Status]()
    for kind, what in steps:
        if kind == "chunk":
            assert isinstance(what, list)
            names = np.asarray([name for name, _ in what], dtype=object)
            ids = np.asarray([status_id for _, status_id in what], dtype=np.int64)
            lazy.add_rejected(names, ids, STATUSES)
            plain.update((name, STATUSES[status_id - 1]) for name, status_id in what)
        else:
            assert isinstance(what, str)
            lazy[what] = plain[what] = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "written")
    if read == "items":
        assert list(lazy.items()) == list(plain.items())
    elif read == "get":
        assert [lazy.get(name) for name in NAMES] == [plain.get(name) for name in NAMES]
    else:
        assert len(lazy) == len(plain)
