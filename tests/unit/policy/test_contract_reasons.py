"""A policy result's reasons: each said once, in order, empty ones dropped; a denial without any reason reads
the fixed fallback, never a bare prefix."""

from __future__ import annotations

import pytest

from kubesched.plugins.security.security_audit_filter import DENIED_PREFIX, denial_status
from kubesched.policy.contract import interpret_result
from kubesched.policyapi.contract import NO_REASON, Decision, denial_reason


@pytest.mark.parametrize(
    ("result", "reasons"),
    [
        ({"allow": False, "reason": "no root", "deny": ["no root"]}, ("no root",)),
        ({"allow": False, "reason": "b", "reasons": ["a", "b"], "deny": ["c", "a"]}, ("b", "a", "c")),
        ({"deny": ["x", "x"]}, ("x",)),
        ({"allow": False, "reason": ""}, ()),
        ({"allow": False, "reason": "  ", "deny": ["", "real"]}, ("real",)),
    ],
)
def test_reasons_are_deduplicated_in_order_and_empty_ones_dropped(
    result: dict[str, object], reasons: tuple[str, ...]
) -> None:
    assert interpret_result(result).reasons == reasons


def test_a_denial_without_a_reason_reads_the_fallback() -> None:
    decision = interpret_result({"allow": False, "reason": ""})
    assert not decision.allowed
    assert denial_status(decision).message == DENIED_PREFIX + NO_REASON
    assert NO_REASON == "denied by policy, no reason given"
    assert denial_reason(("a", "b")) == "a; b"
    same = interpret_result({"allow": False, "reason": "registry untrusted", "deny": ["registry untrusted"]})
    assert denial_status(same).message == "Denied by security policy: registry untrusted"
    assert isinstance(same, Decision)
