"""The slots a per-slot cache learns changed since its last read: what the table's log says, and, for readers of
the same stretch of the log, one shared read-only array (the resource scorers, NodeResourcesFit's failure keys
and InterPodAffinity's term counts each read it every cycle)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.framework.node_table import NodeTable
from kubesched.framework.slot_values import SlotStamps

# Each step: ("touch", slot) stamps a slot; ("read", reader) has one reader read its changes.
steps = st.lists(
    st.one_of(
        st.tuples(st.just("touch"), st.integers(0, 11)),
        st.tuples(st.just("read"), st.integers(0, 2)),
    ),
    max_size=400,
)


@settings(max_examples=200, deadline=None)
@given(steps=steps)
def test_each_reader_learns_exactly_the_slots_touched_since_its_last_read(steps: list[tuple[str, int]]) -> None:
    table = NodeTable(capacity=4)  # 16 slots: the log is cut (change_base moves) after 128 entries
    table.ensure_capacity(12)
    readers = [SlotStamps() for _ in range(3)]
    pending: list[set[int] | None] = [None, None, None]  # None: the reader has not read yet
    for kind, value in steps:
        if kind == "touch":
            table.clear(value)
            for seen in pending:
                if seen is not None:
                    seen.add(value)
            continue
        changed, fresh = readers[value].changed(table)
        if pending[value] is None:
            assert fresh and changed.tolist() == list(range(table.capacity))
        elif not fresh and changed.shape[0] != table.capacity:
            assert changed.tolist() == sorted(pending[value] or ())
        else:
            # Fell behind a cut of the log: everything is reported again, a superset of what changed.
            assert set(pending[value] or ()) <= set(changed.tolist())
        pending[value] = set()


def test_readers_of_one_stretch_share_one_read_only_array() -> None:
    table = NodeTable(capacity=64)
    first, second, late = SlotStamps(), SlotStamps(), SlotStamps()
    for reader in (first, second):
        reader.changed(table)
    table.clear(5)
    table.clear(3)
    table.clear(5)
    a, _ = first.changed(table)
    b, _ = second.changed(table)
    assert a.tolist() == [3, 5]
    assert a is b
    with pytest.raises(ValueError, match="read-only"):
        a[0] = 1
    late.changed(table)
    table.clear(7)
    c, _ = late.changed(table)
    d, _ = first.changed(table)
    assert c.tolist() == d.tolist() == [7]
    nothing, fresh = second.changed(table)
    assert not fresh and nothing.tolist() == [7]
    assert np.array_equal(first.changed(table)[0], np.zeros(0, dtype=np.int64))
