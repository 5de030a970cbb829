"""The field names of every object kubesched loads, as Kubernetes v1.35 spells them: one nested table per kind.

Who uses it: :func:`kubesched.api.manifest_checks.unknown_fields`, which walks a manifest against
:data:`KINDS` and reports the keys the kind's type does not have, as the API server's strict field validation
does (``unknown field "spec.containers[0].resource"``). Nothing here is used to read values: the
``from_dict`` builders in :mod:`kubesched.api.objects`, :mod:`~kubesched.api.storage` and
:mod:`~kubesched.api.workloads` do that.

A schema maps each field name (the Go struct's json tag) to one of:

- another schema, for a nested object;
- :class:`ListOf` a schema, for a list of objects (``containers``, ``tolerations``, ...);
- :data:`ANY`, for a scalar, a list of scalars, or a subtree that is not checked (probes, securityContext,
  the inner fields of most volume sources, ``status`` of most kinds); :data:`FREE` (the same value) marks a
  map whose keys are data rather than field names (labels, annotations, nodeSelector, resource lists,
  StorageClass parameters), which accepts any key.

Sources: ``staging/src/k8s.io/api/{core,apps,policy,scheduling,storage}/v1/types.go``; kubesched's own
MemberCluster follows :mod:`kubesched.api.multicluster` (and the CRD in ``deploy/crds``). Fields added up to v1.35
are included (``spec.resources``, ``hostnameOverride`` and ``workloadRef`` on a PodSpec, ``restartPolicyRules``
on a container, ``claims[].request``, the ``image`` volume source, ``status.declaredFeatures`` on a Node), so a
dump from a current cluster is clean; a field that only a newer Kubernetes has is reported, as an older API
server's strict decoder would report it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, TypeAlias

__all__ = ["ANY", "FREE", "GENERIC", "KINDS", "OBJECT_META", "POD_SPEC", "Field", "ListOf", "Schema", "fields"]


class _AnyValue:
    """The type of :data:`ANY`: a value the unknown-field walk does not descend into."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ANY"


ANY: Final = _AnyValue()
"""A scalar, a list of scalars, or a subtree whose keys are not checked."""

FREE: Final = ANY
"""A map whose keys are data (label keys, resource names, parameters): any key is accepted."""


@dataclass(frozen=True, slots=True)
class ListOf:
    """A list whose items each follow ``item``; the walk names them ``field[i]``."""

    item: Field


Field: TypeAlias = "Mapping[str, Field] | ListOf | _AnyValue"
Schema: TypeAlias = "Mapping[str, Field]"


def fields(*scalars: str, **nested: Field) -> Schema:
    """A schema: each name in ``scalars`` takes any value; each keyword names a field with its own schema."""
    table: dict[str, Field] = dict.fromkeys(scalars, ANY)
    table.update(nested)
    return table


# --- shared pieces (apimachinery meta/v1, core/v1) ---

OBJECT_META: Final = fields(
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "finalizers",
    labels=FREE,
    annotations=FREE,
    ownerReferences=ListOf(fields("apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion")),
    managedFields=ListOf(fields("manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1", "subresource")),
)

LABEL_SELECTOR: Final = fields(matchLabels=FREE, matchExpressions=ListOf(fields("key", "operator", "values")))

_NODE_SELECTOR_REQUIREMENTS = ListOf(fields("key", "operator", "values"))
NODE_SELECTOR_TERM: Final = fields(
    matchExpressions=_NODE_SELECTOR_REQUIREMENTS, matchFields=_NODE_SELECTOR_REQUIREMENTS
)
NODE_SELECTOR: Final = fields(nodeSelectorTerms=ListOf(NODE_SELECTOR_TERM))

_POD_AFFINITY_TERM = fields(
    "namespaces",
    "topologyKey",
    "matchLabelKeys",
    "mismatchLabelKeys",
    labelSelector=LABEL_SELECTOR,
    namespaceSelector=LABEL_SELECTOR,
)
_POD_AFFINITY = fields(
    requiredDuringSchedulingIgnoredDuringExecution=ListOf(_POD_AFFINITY_TERM),
    preferredDuringSchedulingIgnoredDuringExecution=ListOf(fields("weight", podAffinityTerm=_POD_AFFINITY_TERM)),
)
AFFINITY: Final = fields(
    nodeAffinity=fields(
        requiredDuringSchedulingIgnoredDuringExecution=NODE_SELECTOR,
        preferredDuringSchedulingIgnoredDuringExecution=ListOf(fields("weight", preference=NODE_SELECTOR_TERM)),
    ),
    podAffinity=_POD_AFFINITY,
    podAntiAffinity=_POD_AFFINITY,
)

RESOURCE_REQUIREMENTS: Final = fields(limits=FREE, requests=FREE, claims=ListOf(fields("name", "request")))

CONTAINER: Final = fields(
    "name",
    "image",
    "command",
    "args",
    "workingDir",
    "restartPolicy",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "imagePullPolicy",
    "stdin",
    "stdinOnce",
    "tty",
    # Not checked inside: nothing in them changes where a pod may run.
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "securityContext",
    ports=ListOf(fields("name", "hostPort", "containerPort", "protocol", "hostIP")),
    envFrom=ListOf(fields("prefix", "configMapRef", "secretRef")),
    env=ListOf(fields("name", "value", "valueFrom")),
    resources=RESOURCE_REQUIREMENTS,
    resizePolicy=ListOf(fields("resourceName", "restartPolicy")),
    restartPolicyRules=ListOf(fields("action", "exitCodes")),
    volumeMounts=ListOf(
        fields("name", "readOnly", "recursiveReadOnly", "mountPath", "subPath", "mountPropagation", "subPathExpr")
    ),
    volumeDevices=ListOf(fields("name", "devicePath")),
)
EPHEMERAL_CONTAINER: Final = {**CONTAINER, **fields("targetContainerName")}

PVC_SPEC: Final = fields(
    "accessModes",
    "volumeName",
    "storageClassName",
    "volumeMode",
    "volumeAttributesClassName",
    selector=LABEL_SELECTOR,
    # VolumeResourceRequirements: no claims, unlike a container's.
    resources=fields(limits=FREE, requests=FREE),
    dataSource=fields("apiGroup", "kind", "name"),
    dataSourceRef=fields("apiGroup", "kind", "name", "namespace"),
)

# The volume sources a pod may name; only the two the volume plugins read claims from are checked inside.
VOLUME: Final = fields(
    "name",
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "image",
    persistentVolumeClaim=fields("claimName", "readOnly"),
    ephemeral=fields(volumeClaimTemplate=fields(metadata=OBJECT_META, spec=PVC_SPEC)),
)

POD_SPEC: Final = fields(
    "restartPolicy",
    "terminationGracePeriodSeconds",
    "activeDeadlineSeconds",
    "dnsPolicy",
    "serviceAccountName",
    "serviceAccount",
    "automountServiceAccountToken",
    "nodeName",
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "shareProcessNamespace",
    "securityContext",
    "hostname",
    "subdomain",
    "schedulerName",
    "priorityClassName",
    "priority",
    "runtimeClassName",
    "enableServiceLinks",
    "preemptionPolicy",
    "setHostnameAsFQDN",
    "hostUsers",
    "hostnameOverride",
    nodeSelector=FREE,
    overhead=FREE,
    volumes=ListOf(VOLUME),
    initContainers=ListOf(CONTAINER),
    containers=ListOf(CONTAINER),
    ephemeralContainers=ListOf(EPHEMERAL_CONTAINER),
    imagePullSecrets=ListOf(fields("name")),
    affinity=AFFINITY,
    tolerations=ListOf(fields("key", "operator", "value", "effect", "tolerationSeconds")),
    hostAliases=ListOf(fields("ip", "hostnames")),
    dnsConfig=fields("nameservers", "searches", options=ListOf(fields("name", "value"))),
    readinessGates=ListOf(fields("conditionType")),
    topologySpreadConstraints=ListOf(
        fields(
            "maxSkew",
            "topologyKey",
            "whenUnsatisfiable",
            "minDomains",
            "nodeAffinityPolicy",
            "nodeTaintsPolicy",
            "matchLabelKeys",
            labelSelector=LABEL_SELECTOR,
        )
    ),
    os=fields("name"),
    schedulingGates=ListOf(fields("name")),
    resourceClaims=ListOf(fields("name", "resourceClaimName", "resourceClaimTemplateName")),
    resources=RESOURCE_REQUIREMENTS,
    workloadRef=fields("name", "podGroup", "podGroupReplicaKey"),
)

POD_TEMPLATE: Final = fields(metadata=OBJECT_META, spec=POD_SPEC)


def _typed(spec: Field, status: Field = ANY) -> Schema:
    """A kind with the usual apiVersion/kind/metadata/spec/status shape."""
    return fields("apiVersion", "kind", metadata=OBJECT_META, spec=spec, status=status)


# --- the kinds ---

_NODE = _typed(
    fields(
        "podCIDR",
        "podCIDRs",
        "providerID",
        "unschedulable",
        "configSource",
        "externalID",
        taints=ListOf(fields("key", "value", "effect", "timeAdded")),
    ),
    fields(
        "phase",
        "daemonEndpoints",
        "volumesInUse",
        "config",
        "runtimeHandlers",
        "features",
        "declaredFeatures",
        capacity=FREE,
        allocatable=FREE,
        conditions=ListOf(fields("type", "status", "lastHeartbeatTime", "lastTransitionTime", "reason", "message")),
        addresses=ListOf(fields("type", "address")),
        nodeInfo=fields(
            "machineID",
            "systemUUID",
            "bootID",
            "kernelVersion",
            "osImage",
            "containerRuntimeVersion",
            "kubeletVersion",
            "kubeProxyVersion",
            "operatingSystem",
            "architecture",
            "swap",
        ),
        images=ListOf(fields("names", "sizeBytes")),
        volumesAttached=ListOf(fields("name", "devicePath")),
    ),
)

_PVC = _typed(
    PVC_SPEC,
    fields(
        "phase",
        "accessModes",
        "conditions",
        "currentVolumeAttributesClassName",
        "modifyVolumeStatus",
        capacity=FREE,
        allocatedResources=FREE,
        allocatedResourceStatuses=FREE,
    ),
)

_PERSISTENT_VOLUME = _typed(
    fields(
        "accessModes",
        "persistentVolumeReclaimPolicy",
        "storageClassName",
        "mountOptions",
        "volumeMode",
        "volumeAttributesClassName",
        # PersistentVolumeSource, inlined: the sources an administrator may provision.
        "gcePersistentDisk",
        "awsElasticBlockStore",
        "hostPath",
        "glusterfs",
        "nfs",
        "rbd",
        "iscsi",
        "cinder",
        "cephfs",
        "fc",
        "flocker",
        "flexVolume",
        "azureFile",
        "vsphereVolume",
        "quobyte",
        "azureDisk",
        "photonPersistentDisk",
        "portworxVolume",
        "scaleIO",
        "local",
        "storageos",
        "csi",
        capacity=FREE,
        claimRef=fields("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"),
        nodeAffinity=fields(required=NODE_SELECTOR),
    ),
    fields("phase", "message", "reason", "lastPhaseTransitionTime"),
)

_SECRET_REF = fields("namespace", "name", "key")

# kubesched's own kind (multicluster.kubesched.io/v1alpha1), as deploy/crds/memberclusters.yaml declares it.
_MEMBER_CLUSTER = _typed(
    fields(
        taints=ListOf(fields("key", "value", "effect", "timeAdded")),
        cost=fields("currency", "cpuPerCoreHour", "memoryPerGiBHour", extendedPerUnitHour=FREE),
        connection=fields(
            kubeconfigSecretRef=_SECRET_REF,
            agent=fields("url", "caBundle", tokenSecretRef=_SECRET_REF),
        ),
    ),
    fields(
        "ready",
        "observedAt",
        conditions=ListOf(fields("type", "status", "lastTransitionTime", "reason", "message", "observedGeneration")),
        allocatable=FREE,
        allocated=FREE,
        nodeSummary=ListOf(fields("count", free=FREE, taints=ListOf(fields("key", "value", "effect")))),
        apiEnablements=ListOf(fields("groupVersion", resources=ListOf(fields("name", "kind")))),
    ),
)

KINDS: Final[Mapping[str, Schema]] = {
    "Pod": _typed(POD_SPEC),
    "Node": _NODE,
    "Namespace": _typed(fields("finalizers"), fields("phase", "conditions")),
    "PriorityClass": fields(
        "apiVersion", "kind", "value", "globalDefault", "description", "preemptionPolicy", metadata=OBJECT_META
    ),
    "PodDisruptionBudget": _typed(
        fields("minAvailable", "maxUnavailable", "unhealthyPodEvictionPolicy", selector=LABEL_SELECTOR)
    ),
    "Service": _typed(
        fields(
            "clusterIP",
            "clusterIPs",
            "type",
            "externalIPs",
            "sessionAffinity",
            "loadBalancerIP",
            "loadBalancerSourceRanges",
            "externalName",
            "externalTrafficPolicy",
            "healthCheckNodePort",
            "publishNotReadyAddresses",
            "ipFamilies",
            "ipFamilyPolicy",
            "allocateLoadBalancerNodePorts",
            "loadBalancerClass",
            "internalTrafficPolicy",
            "trafficDistribution",
            selector=FREE,
            ports=ListOf(fields("name", "protocol", "appProtocol", "port", "targetPort", "nodePort")),
            sessionAffinityConfig=fields(clientIP=fields("timeoutSeconds")),
        )
    ),
    # The selector of a ReplicationController is a plain map (equality only), of the apps/v1 kinds a LabelSelector.
    "ReplicationController": _typed(fields("replicas", "minReadySeconds", selector=FREE, template=POD_TEMPLATE)),
    "ReplicaSet": _typed(fields("replicas", "minReadySeconds", selector=LABEL_SELECTOR, template=POD_TEMPLATE)),
    "StatefulSet": _typed(
        fields(
            "replicas",
            "serviceName",
            "podManagementPolicy",
            "revisionHistoryLimit",
            "minReadySeconds",
            selector=LABEL_SELECTOR,
            template=POD_TEMPLATE,
            volumeClaimTemplates=ListOf(_PVC),
            updateStrategy=fields("type", rollingUpdate=fields("partition", "maxUnavailable")),
            persistentVolumeClaimRetentionPolicy=fields("whenDeleted", "whenScaled"),
            ordinals=fields("start"),
        )
    ),
    "PersistentVolume": _PERSISTENT_VOLUME,
    "PersistentVolumeClaim": _PVC,
    "StorageClass": fields(
        "apiVersion",
        "kind",
        "provisioner",
        "reclaimPolicy",
        "mountOptions",
        "allowVolumeExpansion",
        "volumeBindingMode",
        metadata=OBJECT_META,
        parameters=FREE,
        allowedTopologies=ListOf(fields(matchLabelExpressions=ListOf(fields("key", "values")))),
    ),
    # No status: a CSINode has only a spec.
    "CSINode": fields(
        "apiVersion",
        "kind",
        metadata=OBJECT_META,
        spec=fields(drivers=ListOf(fields("name", "nodeID", "topologyKeys", allocatable=fields("count")))),
    ),
    "MemberCluster": _MEMBER_CLUSTER,
}
"""Kind -> the schema of its whole object, for every kind :mod:`kubesched.api.manifests` loads."""

GENERIC: Final = _typed(ANY)
"""A kind without a table: only the top level and metadata are checked."""
