"""A policy result's reasons: each said once, in order, empty ones dropped, a reason that only joins the others
(``reason := concat("; ", sort(deny))``) left out; a denial without any reason reads the fixed fallback, never a
bare prefix."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubesched.plugins.security.security_audit_filter import DENIED_PREFIX, denial_status
from kubesched.policy.contract import interpret_result
from kubesched.policy.embedded import EmbeddedRegoEngine
from kubesched.policyapi.contract import NO_REASON, Decision, denial_reason


@pytest.mark.parametrize(
    ("result", "reasons"),
    [
        ({"allow": False, "reason": "no root", "deny": ["no root"]}, ("no root",)),
        ({"allow": False, "reason": "b", "reasons": ["a", "b"], "deny": ["c", "a"]}, ("b", "a", "c")),
        ({"deny": ["x", "x"]}, ("x",)),
        ({"allow": False, "reason": ""}, ()),
        ({"allow": False, "reason": "  ", "deny": ["", "real"]}, ("real",)),
        # reason := concat("; ", sort(deny)): the joined reason repeats the others, shown once each.
        ({"allow": False, "reason": "a; b", "deny": ["b", "a"]}, ("a", "b")),
        ({"reason": "a; b", "deny": ["c", "b", "a"]}, ("a", "b", "c")),
        # A reason that only looks joined is kept: not every part is another reason.
        ({"allow": False, "reason": "a; z", "deny": ["a", "b"]}, ("a; z", "a", "b")),
        ({"allow": False, "reason": "x; y"}, ("x; y",)),
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
    joined = interpret_result({"allow": False, "reason": "no root; untrusted", "deny": ["untrusted", "no root"]})
    assert denial_status(joined).message == "Denied by security policy: no root; untrusted"
    assert isinstance(same, Decision)


JOINED_REASON_POLICY = """package kubernetes.authz

import rego.v1

deny contains "image is not from a trusted registry" if not startswith(input.pod.spec.containers[0].image, "ok/")

deny contains "runs as root" if input.pod.spec.securityContext.runAsUser == 0

reason := concat("; ", sort(deny))

allow if count(deny) == 0
"""


def test_a_rego_policy_stating_its_denials_twice_reads_each_once(tmp_path: Path) -> None:
    """The common Rego shape: ``deny`` a set and ``reason`` the same joined; the message names each denial once."""
    policy = tmp_path / "policy.rego"
    policy.write_text(JOINED_REASON_POLICY)
    engine = EmbeddedRegoEngine([str(policy)])
    pod = {"metadata": {"name": "p"}, "spec": {"securityContext": {"runAsUser": 0}, "containers": [{"image": "x"}]}}
    decision = engine.decide({"pod": pod, "node": {"metadata": {"name": "n"}}, "operation": "schedule"})
    assert denial_status(decision).message == (
        "Denied by security policy: image is not from a trusted registry; runs as root"
    )
