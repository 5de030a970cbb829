"""Cluster plugins: the framework's nodes are member clusters (super nodes, :mod:`kubesched.federation`).

Filters: :class:`ClusterReadiness` (ready and fresh), :class:`ClusterAPIEnablement` (the workload's APIs are
served), :class:`ClusterCapacity` (the pod fits on one node of the cluster). Scores (0..100 after
NormalizeScore): :class:`ClusterBalance` (least allocated), :class:`ClusterCost` (cheapest),
:class:`ClusterLocality` (where the workload already runs). They read member state only from the cycle's
cluster snapshot (:mod:`kubesched.clusterapi.contract`), never from the network. The two-phase commit:
:class:`ClusterReservation` (Permit: reserve in the member and approve, in the background; Filter: suspect
clusters) and :class:`ClusterBind` (Bind: the member creates the pod), through the Handle's cluster committer.
"""

from kubesched.plugins.multicluster.api_enablement import ClusterAPIEnablement
from kubesched.plugins.multicluster.args import (
    ClusterAPIEnablementArgs,
    ClusterBalanceArgs,
    ClusterBindArgs,
    ClusterCapacityArgs,
    ClusterCostArgs,
    ClusterLocalityArgs,
    ClusterReadinessArgs,
    ClusterReservationArgs,
)
from kubesched.plugins.multicluster.balance import ClusterBalance
from kubesched.plugins.multicluster.bind import ClusterBind
from kubesched.plugins.multicluster.capacity import ClusterCapacity
from kubesched.plugins.multicluster.cost import ClusterCost
from kubesched.plugins.multicluster.locality import ClusterLocality
from kubesched.plugins.multicluster.readiness import ClusterReadiness
from kubesched.plugins.multicluster.reservation import ClusterReservation

__all__ = [
    "ClusterAPIEnablement",
    "ClusterAPIEnablementArgs",
    "ClusterBalance",
    "ClusterBalanceArgs",
    "ClusterBind",
    "ClusterBindArgs",
    "ClusterCapacity",
    "ClusterCapacityArgs",
    "ClusterCost",
    "ClusterCostArgs",
    "ClusterLocality",
    "ClusterLocalityArgs",
    "ClusterReadiness",
    "ClusterReadinessArgs",
    "ClusterReservation",
    "ClusterReservationArgs",
]
