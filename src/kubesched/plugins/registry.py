"""The in-tree plugin registry: one explicit table of every plugin kubesched knows by name.

Who calls it: the scheduler (to build one framework per profile), the config loader (as its plugin catalog: names,
extension points, args types, which default plugins are not built yet) and the CLI's ``plugins`` command. Nothing
registers itself on import (docs/explanation/design.md#one-explicit-registry); out-of-tree plugins are merged in
through the ``kubesched.plugins`` entry-point group by ``framework.runtime.registry.with_entry_points``.

Built plugins are registered with their class (constructed as ``Cls(args, handle)``); plugins of
kube-scheduler's default set that are not built yet are ``planned`` with the extension points they have
upstream (v1.35, config spelling), so configs that merely inherit the defaults still load.
"""

from __future__ import annotations

from kubesched.framework.runtime.registry import PluginRegistration, Registry, extension_points_of
from kubesched.plugins import names
from kubesched.plugins.defaultbinder import DefaultBinder
from kubesched.plugins.defaultpreemption import DefaultPreemption, DefaultPreemptionArgs
from kubesched.plugins.dynamicresources import DynamicResources, DynamicResourcesArgs
from kubesched.plugins.imagelocality import ImageLocality
from kubesched.plugins.interpodaffinity import InterPodAffinity, InterPodAffinityArgs
from kubesched.plugins.multicluster import (
    ClusterAPIEnablement,
    ClusterAPIEnablementArgs,
    ClusterBalance,
    ClusterBalanceArgs,
    ClusterBind,
    ClusterBindArgs,
    ClusterCapacity,
    ClusterCapacityArgs,
    ClusterCost,
    ClusterCostArgs,
    ClusterLocality,
    ClusterLocalityArgs,
    ClusterReadiness,
    ClusterReadinessArgs,
    ClusterReservation,
    ClusterReservationArgs,
)
from kubesched.plugins.nodeaffinity import NodeAffinity, NodeAffinityArgs
from kubesched.plugins.nodename import NodeName
from kubesched.plugins.nodeports import NodePorts
from kubesched.plugins.noderesources import (
    BalancedAllocation,
    Fit,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
)
from kubesched.plugins.nodeunschedulable import NodeUnschedulable
from kubesched.plugins.nodevolumelimits import CSILimits
from kubesched.plugins.podtopologyspread import PodTopologySpread, PodTopologySpreadArgs
from kubesched.plugins.queuesort import PrioritySort
from kubesched.plugins.schedulinggates import SchedulingGates
from kubesched.plugins.security.args import SecurityAuditFilterArgs, SecurityAuditPermitArgs
from kubesched.plugins.security.compliance_score import ComplianceScore, ComplianceScoreArgs
from kubesched.plugins.security.security_audit_filter import BatchedSecurityAuditFilter, new_security_audit_filter
from kubesched.plugins.security.security_audit_permit import SecurityAuditPermit
from kubesched.plugins.tainttoleration import TaintToleration
from kubesched.plugins.volumebinding import VolumeBinding, VolumeBindingArgs
from kubesched.plugins.volumerestrictions import VolumeRestrictions
from kubesched.plugins.volumezone import VolumeZone


def in_tree_registry() -> Registry:
    """A fresh copy of the in-tree registry (callers may merge into it)."""
    return {
        names.SCHEDULING_GATES: PluginRegistration.of(names.SCHEDULING_GATES, SchedulingGates),
        names.PRIORITY_SORT: PluginRegistration.of(names.PRIORITY_SORT, PrioritySort),
        names.NODE_UNSCHEDULABLE: PluginRegistration.of(names.NODE_UNSCHEDULABLE, NodeUnschedulable),
        names.NODE_NAME: PluginRegistration.of(names.NODE_NAME, NodeName),
        names.TAINT_TOLERATION: PluginRegistration.of(names.TAINT_TOLERATION, TaintToleration),
        names.NODE_AFFINITY: PluginRegistration.of(names.NODE_AFFINITY, NodeAffinity, args_type=NodeAffinityArgs),
        names.NODE_PORTS: PluginRegistration.of(names.NODE_PORTS, NodePorts),
        names.NODE_RESOURCES_FIT: PluginRegistration.of(names.NODE_RESOURCES_FIT, Fit, args_type=NodeResourcesFitArgs),
        names.VOLUME_RESTRICTIONS: PluginRegistration.of(names.VOLUME_RESTRICTIONS, VolumeRestrictions),
        names.NODE_VOLUME_LIMITS: PluginRegistration.of(names.NODE_VOLUME_LIMITS, CSILimits),
        names.VOLUME_BINDING: PluginRegistration.of(names.VOLUME_BINDING, VolumeBinding, args_type=VolumeBindingArgs),
        names.VOLUME_ZONE: PluginRegistration.of(names.VOLUME_ZONE, VolumeZone),
        names.POD_TOPOLOGY_SPREAD: PluginRegistration.of(
            names.POD_TOPOLOGY_SPREAD, PodTopologySpread, args_type=PodTopologySpreadArgs
        ),
        names.INTER_POD_AFFINITY: PluginRegistration.of(
            names.INTER_POD_AFFINITY, InterPodAffinity, args_type=InterPodAffinityArgs
        ),
        names.DYNAMIC_RESOURCES: PluginRegistration.of(
            names.DYNAMIC_RESOURCES, DynamicResources, args_type=DynamicResourcesArgs
        ),
        names.DEFAULT_PREEMPTION: PluginRegistration.of(
            names.DEFAULT_PREEMPTION, DefaultPreemption, args_type=DefaultPreemptionArgs
        ),
        names.NODE_RESOURCES_BALANCED_ALLOCATION: PluginRegistration.of(
            names.NODE_RESOURCES_BALANCED_ALLOCATION,
            BalancedAllocation,
            args_type=NodeResourcesBalancedAllocationArgs,
        ),
        names.IMAGE_LOCALITY: PluginRegistration.of(names.IMAGE_LOCALITY, ImageLocality),
        names.DEFAULT_BINDER: PluginRegistration.of(names.DEFAULT_BINDER, DefaultBinder),
        names.SECURITY_AUDIT_FILTER: PluginRegistration(
            name=names.SECURITY_AUDIT_FILTER,
            factory=new_security_audit_filter,
            args_type=SecurityAuditFilterArgs,
            extension_points=extension_points_of(BatchedSecurityAuditFilter),
            description="Filter: nodes the security policy (OPA or embedded Rego) denies for the pod",
        ),
        names.COMPLIANCE_SCORE: PluginRegistration.of(
            names.COMPLIANCE_SCORE, ComplianceScore, args_type=ComplianceScoreArgs
        ),
        names.SECURITY_AUDIT_PERMIT: PluginRegistration.of(
            names.SECURITY_AUDIT_PERMIT, SecurityAuditPermit, args_type=SecurityAuditPermitArgs
        ),
        names.CLUSTER_READINESS: PluginRegistration.of(
            names.CLUSTER_READINESS, ClusterReadiness, args_type=ClusterReadinessArgs
        ),
        names.CLUSTER_API_ENABLEMENT: PluginRegistration.of(
            names.CLUSTER_API_ENABLEMENT, ClusterAPIEnablement, args_type=ClusterAPIEnablementArgs
        ),
        names.CLUSTER_CAPACITY: PluginRegistration.of(
            names.CLUSTER_CAPACITY, ClusterCapacity, args_type=ClusterCapacityArgs
        ),
        names.CLUSTER_BALANCE: PluginRegistration.of(
            names.CLUSTER_BALANCE, ClusterBalance, args_type=ClusterBalanceArgs
        ),
        names.CLUSTER_COST: PluginRegistration.of(names.CLUSTER_COST, ClusterCost, args_type=ClusterCostArgs),
        names.CLUSTER_LOCALITY: PluginRegistration.of(
            names.CLUSTER_LOCALITY, ClusterLocality, args_type=ClusterLocalityArgs
        ),
        names.CLUSTER_RESERVATION: PluginRegistration.of(
            names.CLUSTER_RESERVATION, ClusterReservation, args_type=ClusterReservationArgs
        ),
        names.CLUSTER_BIND: PluginRegistration.of(names.CLUSTER_BIND, ClusterBind, args_type=ClusterBindArgs),
    }
