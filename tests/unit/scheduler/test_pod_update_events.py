"""Which updates of a pending pod are scheduling events (kube-scheduler's ``isPodUpdated`` and
``PodSchedulingPropertiesChange``): the API server's bookkeeping and the pod's status are not, so the scheduler's own
PodScheduled condition and nominatedNodeName never requeue the pod they were written for."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from kubesched.api.objects import Pod
from kubesched.framework.events import ActionType
from kubesched.scheduler.event_handlers import pod_update_action, pod_updated
from kubesched.testing.builders import make_pod

Change = Callable[[dict[str, Any]], None]


def listed() -> dict[str, Any]:
    """A pending pod as a list returns it: no apiVersion or kind on the item."""
    raw = make_pod("web").namespace("apps").req(cpu="100m").raw()
    raw.pop("apiVersion", None)
    raw.pop("kind", None)
    raw["metadata"] |= {"resourceVersion": "10", "labels": {"app": "web"}}
    raw["status"] = {"phase": "Pending"}
    return raw


def status_patch(raw: dict[str, Any]) -> None:
    raw["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    raw["status"]["nominatedNodeName"] = "node-a"


def bookkeeping(raw: dict[str, Any]) -> None:
    raw["metadata"] |= {"resourceVersion": "11", "generation": 2, "finalizers": ["example.com/f"]}
    raw["metadata"]["managedFields"] = [{"manager": "kubesched", "operation": "Update", "subresource": "status"}]


def as_watched(raw: dict[str, Any]) -> None:
    raw["apiVersion"], raw["kind"] = "v1", "Pod"


def relabel(raw: dict[str, Any]) -> None:
    raw["metadata"]["labels"]["tier"] = "front"


def new_image(raw: dict[str, Any]) -> None:
    raw["spec"]["containers"][0]["image"] = "nginx:1.28"


def annotate(raw: dict[str, Any]) -> None:
    raw["metadata"]["annotations"] = {"example.com/ticket": "T-1"}


def claim_status(raw: dict[str, Any]) -> None:
    raw["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "web-gpu"}]


@pytest.mark.parametrize(
    ("changes", "action"),
    [
        pytest.param([status_patch, bookkeeping], ActionType(0), id="the-schedulers-status-patch-is-no-event"),
        pytest.param([status_patch, bookkeeping, as_watched], ActionType(0), id="listed-then-watched-is-the-same-pod"),
        pytest.param([relabel], ActionType.UPDATE_POD_LABEL, id="a-label-change"),
        pytest.param([new_image, status_patch], ActionType.UPDATE_POD_OTHER, id="an-image-change-is-another-update"),
        pytest.param([annotate], ActionType.UPDATE_POD_OTHER, id="an-annotation-change-is-another-update"),
        pytest.param([claim_status], ActionType.UPDATE_POD_OTHER, id="resource-claim-statuses-count"),
    ],
)
def test_pod_update_events(changes: list[Change], action: ActionType) -> None:
    old = listed()
    new = copy.deepcopy(old)
    for change in changes:
        change(new)
    before, after = Pod.from_dict(old, "old"), Pod.from_dict(new, "new")
    assert pod_update_action(before, after) == action
    assert pod_updated(before, after) is bool(action)
