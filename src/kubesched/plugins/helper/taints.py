"""Taint and toleration rules shared by TaintToleration and NodeUnschedulable (component-helpers).

``Toleration.tolerates`` (kubesched.api) is Kubernetes' ``ToleratesTaint``; this module adds the list forms
and the "which taints stop scheduling" filter kube-scheduler's ``helper.DoNotScheduleTaintsFilterFunc`` uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kubesched.api.objects import Taint, Toleration

TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
EFFECT_NO_SCHEDULE = "NoSchedule"
EFFECT_PREFER_NO_SCHEDULE = "PreferNoSchedule"
EFFECT_NO_EXECUTE = "NoExecute"

UNSCHEDULABLE_TAINT = Taint(key=TAINT_NODE_UNSCHEDULABLE, value="", effect=EFFECT_NO_SCHEDULE)
"""The taint a cordoned node implies; tolerating it also tolerates ``spec.unschedulable``."""


def is_do_not_schedule(taint: Taint) -> bool:
    """NoSchedule and NoExecute taints keep new pods off a node; PreferNoSchedule only scores."""
    return taint.effect in (EFFECT_NO_SCHEDULE, EFFECT_NO_EXECUTE)


def tolerations_tolerate_taint(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(toleration.tolerates(taint) for toleration in tolerations)


def find_untolerated_do_not_schedule_taint(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first NoSchedule/NoExecute taint (in node order) that no toleration tolerates, if any."""
    for taint in taints:
        if is_do_not_schedule(taint) and not tolerations_tolerate_taint(tolerations, taint):
            return taint
    return None
