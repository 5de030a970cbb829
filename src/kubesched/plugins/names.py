"""The names of kube-scheduler's in-tree plugins, as config files spell them.

Who reads it: every plugin's ``name`` property, :mod:`kubesched.plugins.registry`, and tests. These are
the 19 plugins of kube-scheduler v1.35's default set (``DynamicResources`` joined it in v1.34):
upstream's ``plugins/names/names.go``.
"""

from __future__ import annotations

from typing import Final

PRIORITY_SORT: Final = "PrioritySort"
DEFAULT_BINDER: Final = "DefaultBinder"
DEFAULT_PREEMPTION: Final = "DefaultPreemption"
DYNAMIC_RESOURCES: Final = "DynamicResources"
IMAGE_LOCALITY: Final = "ImageLocality"
INTER_POD_AFFINITY: Final = "InterPodAffinity"
NODE_AFFINITY: Final = "NodeAffinity"
NODE_NAME: Final = "NodeName"
NODE_PORTS: Final = "NodePorts"
NODE_RESOURCES_BALANCED_ALLOCATION: Final = "NodeResourcesBalancedAllocation"
NODE_RESOURCES_FIT: Final = "NodeResourcesFit"
NODE_UNSCHEDULABLE: Final = "NodeUnschedulable"
NODE_VOLUME_LIMITS: Final = "NodeVolumeLimits"
POD_TOPOLOGY_SPREAD: Final = "PodTopologySpread"
SCHEDULING_GATES: Final = "SchedulingGates"
TAINT_TOLERATION: Final = "TaintToleration"
VOLUME_BINDING: Final = "VolumeBinding"
VOLUME_RESTRICTIONS: Final = "VolumeRestrictions"
VOLUME_ZONE: Final = "VolumeZone"

# kubesched's own plugins (not in kube-scheduler's default set).
SECURITY_AUDIT_FILTER: Final = "SecurityAuditFilter"
SECURITY_AUDIT_PERMIT: Final = "SecurityAuditPermit"
COMPLIANCE_SCORE: Final = "ComplianceScore"

# kubesched's cluster plugins: the nodes of a multi-cluster profile are member clusters.
CLUSTER_READINESS: Final = "ClusterReadiness"
CLUSTER_API_ENABLEMENT: Final = "ClusterAPIEnablement"
CLUSTER_CAPACITY: Final = "ClusterCapacity"
CLUSTER_BALANCE: Final = "ClusterBalance"
CLUSTER_COST: Final = "ClusterCost"
CLUSTER_LOCALITY: Final = "ClusterLocality"
CLUSTER_RESERVATION: Final = "ClusterReservation"
CLUSTER_BIND: Final = "ClusterBind"

ALL: Final = (
    SCHEDULING_GATES,
    PRIORITY_SORT,
    NODE_UNSCHEDULABLE,
    NODE_NAME,
    TAINT_TOLERATION,
    NODE_AFFINITY,
    NODE_PORTS,
    NODE_RESOURCES_FIT,
    VOLUME_RESTRICTIONS,
    NODE_VOLUME_LIMITS,
    VOLUME_BINDING,
    VOLUME_ZONE,
    POD_TOPOLOGY_SPREAD,
    INTER_POD_AFFINITY,
    DYNAMIC_RESOURCES,
    DEFAULT_PREEMPTION,
    NODE_RESOURCES_BALANCED_ALLOCATION,
    IMAGE_LOCALITY,
    DEFAULT_BINDER,
)
"""Every in-tree name, in kube-scheduler's default ``multiPoint`` order (DynamicResources before DefaultPreemption)."""

KUBESCHED: Final = (SECURITY_AUDIT_FILTER, COMPLIANCE_SCORE, SECURITY_AUDIT_PERMIT)
"""kubesched's own plugins, in registry order; enabled only where a profile names them."""

MULTICLUSTER: Final = (
    CLUSTER_READINESS,
    CLUSTER_API_ENABLEMENT,
    CLUSTER_CAPACITY,
    CLUSTER_BALANCE,
    CLUSTER_COST,
    CLUSTER_LOCALITY,
    CLUSTER_RESERVATION,
    CLUSTER_BIND,
)
"""kubesched's cluster plugins, in registry order. A profile enabling any of them places pods onto member
clusters (:func:`kubesched.federation.profiles.cluster_profiles`)."""
