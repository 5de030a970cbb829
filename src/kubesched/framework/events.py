"""Cluster events and queueing hints: how a plugin tells the queue which changes may help a pod.

A plugin that can reject (PreEnqueue, PreFilter, Filter, Reserve, Permit) lists the events that may
make a rejected pod schedulable, each with an optional hint function deciding for one event whether
the pod should be retried (QUEUE) or not (SKIP). No hint function means QUEUE; a hint that raises
counts as QUEUE; a plugin without ``events_to_register`` is requeued on every event.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TypeAlias

from kubesched.api.objects import Node, Pod


class EventResource(enum.Enum):
    POD = "Pod"
    ASSIGNED_POD = "AssignedPod"
    UNSCHEDULED_POD = "UnschedulablePod"
    NODE = "Node"
    # Storage objects (upstream's GVK strings). The volume plugins register these; an event reaches them
    # only from a backend that watches the kind.
    PERSISTENT_VOLUME = "PersistentVolume"
    PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
    STORAGE_CLASS = "storage.k8s.io/StorageClass"
    CSI_NODE = "storage.k8s.io/CSINode"
    VOLUME_ATTACHMENT = "storage.k8s.io/VolumeAttachment"
    CSI_DRIVER = "storage.k8s.io/CSIDriver"
    CSI_STORAGE_CAPACITY = "storage.k8s.io/CSIStorageCapacity"
    # The revision of a policy engine's policy and data (not a Kubernetes object): a new revision may admit pods
    # the old one denied. The scheduler raises it when a policy client reports another revision.
    POLICY = "kubesched.io/PolicyRevision"
    WILDCARD = "*"


class ActionType(enum.IntFlag):
    ADD = 1
    DELETE = 2
    UPDATE_NODE_ALLOCATABLE = 4
    UPDATE_NODE_LABEL = 8
    UPDATE_NODE_TAINT = 16
    UPDATE_NODE_CONDITION = 32
    UPDATE_NODE_ANNOTATION = 64
    UPDATE_POD_LABEL = 128
    UPDATE_POD_SCALE_DOWN = 256
    UPDATE_POD_TOLERATIONS = 512
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = 1024
    UPDATE_POD_GENERATED_RESOURCE_CLAIM = 2048
    UPDATE_POD_OTHER = 4096
    UPDATE = (
        UPDATE_NODE_ALLOCATABLE
        | UPDATE_NODE_LABEL
        | UPDATE_NODE_TAINT
        | UPDATE_NODE_CONDITION
        | UPDATE_NODE_ANNOTATION
        | UPDATE_POD_LABEL
        | UPDATE_POD_SCALE_DOWN
        | UPDATE_POD_TOLERATIONS
        | UPDATE_POD_SCHEDULING_GATES_ELIMINATED
        | UPDATE_POD_GENERATED_RESOURCE_CLAIM
        | UPDATE_POD_OTHER
    )
    ALL = ADD | DELETE | UPDATE


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """A kind of change; ``label`` is kube-scheduler's event label used in metrics (e.g. ``NodeAdd``)."""

    resource: EventResource
    action: ActionType
    label: str = ""

    def matches(self, other: ClusterEvent) -> bool:
        """True if ``other`` (an event that happened) is covered by this registration."""
        if self.resource is EventResource.WILDCARD or other.resource is EventResource.WILDCARD:
            return True
        same_resource = self.resource is other.resource or (
            self.resource is EventResource.POD
            and other.resource in (EventResource.ASSIGNED_POD, EventResource.UNSCHEDULED_POD)
        )
        return same_resource and bool(self.action & other.action)


class QueueingHint(enum.Enum):
    SKIP = 0
    QUEUE = 1


@dataclass(frozen=True, slots=True)
class PolicyRevision:
    """The object of a ``PolicyRevisionChange`` event: a policy engine (its
    :class:`~kubesched.policyapi.contract.PolicyEngineSpec`) and the revision it reported."""

    engine: Hashable
    revision: str


AnyObject: TypeAlias = Pod | Node | PolicyRevision | None
QueueingHintFn = Callable[[Pod, AnyObject, AnyObject], QueueingHint]
"""(the rejected pod, the object before the change, the object after) → hint."""


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: QueueingHintFn | None = None


NODE_ADD = ClusterEvent(EventResource.NODE, ActionType.ADD, "NodeAdd")
NODE_DELETE = ClusterEvent(EventResource.NODE, ActionType.DELETE, "NodeDelete")
ASSIGNED_POD_ADD = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.ADD, "AssignedPodAdd")
ASSIGNED_POD_DELETE = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete")
UNSCHEDULABLE_TIMEOUT = ClusterEvent(EventResource.WILDCARD, ActionType.ALL, "UnschedulableTimeout")
FORCE_ACTIVATE = ClusterEvent(EventResource.WILDCARD, ActionType.ALL, "ForceActivate")
POLICY_REVISION_CHANGE = ClusterEvent(EventResource.POLICY, ActionType.UPDATE, "PolicyRevisionChange")
