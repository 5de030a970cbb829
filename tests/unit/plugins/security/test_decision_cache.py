"""The decision cache never answers for another policy revision, pod input, time bucket or operation; a decided
entry's statuses by table slot follow the nodes' classes and the decisions."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.framework.node_table import ClassColumn
from kubesched.framework.types import NodeInfo
from kubesched.plugins.security.decision_cache import CacheKey, DecisionCache
from kubesched.plugins.security.security_audit_filter import NodeDecisions
from kubesched.policyapi.contract import Decision, digest
from kubesched.testing.builders import make_node

keys = st.builds(
    CacheKey,
    revision=st.sampled_from(["r1", "r2", "r3"]),
    pod_digest=st.sampled_from(["p1", "p2"]),
    time=st.sampled_from(["t1", "t2"]),
    operation=st.sampled_from(["schedule", "permit"]),
)
operations = st.lists(st.tuples(st.sampled_from(["put", "get"]), keys), max_size=60)


@settings(max_examples=300, deadline=None)
@given(operations=operations, size=st.integers(0, 8))
def test_a_hit_is_always_the_value_stored_under_that_exact_key(
    operations: list[tuple[str, CacheKey]], size: int
) -> None:
    cache: DecisionCache[CacheKey] = DecisionCache(size)
    newest_revision: str | None = None
    for action, key in operations:
        if action == "put":
            cache.put(key, key)  # the value remembers the key it was stored under
        else:
            value = cache.get(key)
            if value is not None:
                assert value == key
                assert key.revision == newest_revision, "entries of an older revision are gone"
        newest_revision = key.revision
        assert len(cache) <= size


def test_new_revision_drops_old_entries() -> None:
    cache: DecisionCache[str] = DecisionCache(10)
    old = CacheKey("r1", "p", "t", "schedule")
    cache.put(old, "old")
    assert cache.get(CacheKey("r2", "p", "t", "schedule")) is None
    assert cache.get(old) is None, "seeing revision r2 dropped r1's decisions"


def test_digest_is_order_independent_and_content_sensitive() -> None:
    assert digest({"a": 1, "b": [1, 2]}) == digest({"b": [1, 2], "a": 1})
    assert digest({"a": 1}) != digest({"a": 2})


# ---- a decided entry's statuses by table slot -------------------------------------------------------------


def _node_info(name: str, pool: str, slot: int) -> NodeInfo:
    return NodeInfo(make_node(name).label("pool", pool).obj(), slot)


def test_statuses_by_slot_follow_the_nodes_classes_and_the_decisions() -> None:
    column = ClassColumn(lambda info: info.node.metadata.labels["pool"], 4)
    for slot, pool in enumerate("aabc"):
        column.assign(slot, _node_info(f"n{slot}", pool, slot))
    entry = NodeDecisions("r1")
    denied = Decision(allowed=False, reasons=("no",))
    entry.record(0, Decision(allowed=True))
    entry.record(1, denied)
    assert entry.status_by_slot(column, None, 3).tolist() == [0, 0, 1, 0]  # class 2 (pool c) not decided: 0
    entry.record(2, denied)
    assert entry.status_by_slot(column, None, 3).tolist() == [0, 0, 1, 1], "a new decision counts"
    version = column.version
    column.assign(0, _node_info("n0", "b", 0))  # relabelled into a denied class
    column.assign(1, _node_info("n1", "a", 1))  # a status-only update: same class, nothing moves
    assert column.version == version + 1
    assert entry.status_by_slot(column, None, 3).tolist() == [1, 0, 1, 1], "a node in another class counts"
    # Grouped: pools a and c one group (allowed), pool b another (denied).
    grouped = NodeDecisions("r1")
    grouped.record(0, Decision(allowed=True))
    grouped.record(1, denied)
    groups = np.asarray([0, 1, 0], dtype=np.int64)
    assert grouped.status_by_slot(column, groups, 2).tolist() == [1, 0, 1, 0]
    regrouped = np.asarray([0, 0, 1], dtype=np.int64)  # another revision's grouping of the same column
    assert grouped.status_by_slot(column, regrouped, 2).tolist() == [0, 0, 0, 1]
