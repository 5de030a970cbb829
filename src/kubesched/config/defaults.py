"""kube-scheduler's defaults for ``kubescheduler.config.k8s.io/v1``: values and the default plugin set.

Read by the loader when it fills in a document and by ``dump_config``. Values are carried over from
kube-scheduler's ``pkg/scheduler/apis/config/v1/defaults.go`` and ``default_plugins.go``.

The default plugin set is kube-scheduler **v1.35**'s: since v1.34 dynamic resource allocation is GA,
its feature gate is on, and ``applyFeatureGates`` puts ``DynamicResources`` right before
DefaultPreemption (so that freeing an idle claim is tried before evicting pods). kubesched's
DynamicResources does what upstream does for pods without ResourceClaims and refuses pods with them.
The in-tree volume-limit plugins EBSLimits, GCEPDLimits and AzureDiskLimits were removed from the set in
v1.32 and are rejected by name (:data:`REMOVED_PLUGINS`), as kube-scheduler does.
"""

from __future__ import annotations

API_GROUP = "kubescheduler.config.k8s.io"
API_VERSION = f"{API_GROUP}/v1"
KIND = "KubeSchedulerConfiguration"
REMOVED_API_VERSIONS: frozenset[str] = frozenset(
    f"{API_GROUP}/{v}" for v in ("v1alpha1", "v1alpha2", "v1beta1", "v1beta2", "v1beta3")
)

DEFAULT_SCHEDULER_NAME = "default-scheduler"
DEFAULT_PARALLELISM = 16
DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE = 0  # adaptive
DEFAULT_POD_INITIAL_BACKOFF_SECONDS = 1
DEFAULT_POD_MAX_BACKOFF_SECONDS = 10

DEFAULT_LEADER_ELECT = True
DEFAULT_LEASE_DURATION_NS = 15 * 10**9
DEFAULT_RENEW_DEADLINE_NS = 10 * 10**9
DEFAULT_RETRY_PERIOD_NS = 2 * 10**9
DEFAULT_RESOURCE_LOCK = "leases"
DEFAULT_RESOURCE_NAMESPACE = "kube-system"
DEFAULT_RESOURCE_NAME = "kube-scheduler"

DEFAULT_CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
DEFAULT_QPS = 50.0
DEFAULT_BURST = 100

MAX_NODE_SCORE = 100
MAX_TOTAL_SCORE = 2**63 - 1  # math.MaxInt64

DEFAULT_PLUGINS: tuple[tuple[str, int], ...] = (
    ("SchedulingGates", 0),
    ("PrioritySort", 0),
    ("NodeUnschedulable", 0),
    ("NodeName", 0),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", 0),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", 0),
    ("NodeVolumeLimits", 0),
    ("VolumeBinding", 0),
    ("VolumeZone", 0),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", 0),
    ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", 0),
)
"""The default ``multiPoint.enabled`` list, in upstream order: (name, weight); weight 0 means unset."""

REMOVED_PLUGINS: tuple[str, ...] = ("AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits")
"""Plugin names kube-scheduler rejects in a v1 config (``invalidPluginsByVersion``)."""

REMOVED_PLUGINS_VERSION = "v1"
"""The version string kube-scheduler prints for them. Upstream takes it from the core/v1 package's
``SchemeGroupVersion``, so the message reads ``was invalid in version "v1" (KubeSchedulerConfiguration is
version "kubescheduler.config.k8s.io/v1")``; we reproduce that verbatim."""
