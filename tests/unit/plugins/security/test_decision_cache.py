"""The decision cache never answers for another policy revision, pod input, time bucket or operation."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.framework.policy import digest
from kubesched.plugins.security.decision_cache import CacheKey, DecisionCache

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
