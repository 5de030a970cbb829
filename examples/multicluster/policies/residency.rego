# Where a hub pod's data may live: the example cluster policy for SecurityAuditFilter in a cluster profile.
#
# Decision document: data.kubesched.clusters, read for one (pod, cluster) pair; kubesched evaluates it for
# every candidate cluster in one query. In a cluster profile the input names the cluster, not a node:
#   {"pod": <pod manifest>, "cluster": {"metadata": {name, labels, annotations}, "spec": {taints}},
#    "operation": "schedule", "time": RFC 3339}
# The cluster's labels are its MemberCluster's (region, zone, provider).
package kubesched.clusters

import rego.v1

residency_label := "multicluster.kubesched.io/data-residency"

region_label := "topology.kubernetes.io/region"

pod_labels := object.get(input.pod.metadata, "labels", {})

cluster_labels := object.get(input.cluster.metadata, "labels", {})

# A pod that names a residency (a region prefix, "eu") runs only in clusters of a region with that prefix.
deny contains msg if {
	wanted := pod_labels[residency_label]
	region := object.get(cluster_labels, region_label, "")
	not startswith(region, concat("", [wanted, "-"]))
	msg := sprintf("data residency %s does not allow region %q", [wanted, region])
}

# A cluster under change freeze (annotation on its MemberCluster) takes nothing new.
deny contains "the cluster is under change freeze" if {
	object.get(object.get(input.cluster.metadata, "annotations", {}), "multicluster.kubesched.io/change-freeze", "") == "true"
}

allow if count(deny) == 0
