# Where a pod may run: the example placement policy for kubesched's SecurityAuditFilter.
#
# Decision document: data.kubernetes.authz, read for one (pod, node) pair at a time; kubesched
# evaluates it for every candidate node in one query. Input:
#   {"pod": <pod manifest>, "node": {"metadata": ..., "spec": ...}, "operation": "schedule", "time": RFC 3339}
# Facts about nodes live in data (data.json), not in the input, so they can change without a restart.
# The pod carries no name (replicas share decisions): messages name the namespace and image instead.
package kubernetes.authz

import rego.v1

default allow := false

# Allow only with positive facts: a well-formed request about a node we know, and no objection.
# (A bare "count(deny) == 0" would allow malformed input, where every deny rule is undefined.)
allow if {
	is_string(input.pod.metadata.namespace)
	count(input.pod.spec.containers) > 0
	is_string(input.node.metadata.name)
	node_record
	count(deny) == 0
}

node_record := data.compliance.nodes[input.node.metadata.name]

pod_namespace := object.get(input.pod.metadata, "namespace", "default")

pod_labels := object.get(input.pod.metadata, "labels", {})

node_labels := object.get(input.node.metadata, "labels", {})

# Unknown nodes are denied: no record means no evidence the node is compliant. (Messages do not name the
# node: kube-scheduler counts identical reasons across nodes, "3 Denied by security policy: ...".)
deny contains "no compliance record for the node" if not node_record

# Namespaces may require a compliance level (e.g. prod needs PCI nodes).
deny contains msg if {
	required := data.config.required_level[pod_namespace]
	level := object.get(node_record, "level", "none")
	level != required
	msg := sprintf("namespace %s requires %s nodes, the node is %s", [pod_namespace, required, level])
}

# Every container image must come from a trusted registry or repository.
deny contains msg if {
	some container in array.concat(
		object.get(input.pod.spec, "initContainers", []),
		object.get(input.pod.spec, "containers", []),
	)
	not trusted(container.image)
	msg := sprintf("image %s is not from a trusted registry", [container.image])
}

trusted(image) if {
	some prefix in data.config.trusted_image_prefixes
	startswith(image, prefix)
}

# Restricted pools admit only pods cleared for that pool.
deny contains msg if {
	pool := object.get(node_labels, "security.example.com/pool", "")
	startswith(pool, "restricted-")
	object.get(pod_labels, "security.example.com/clearance", "") != pool
	msg := sprintf("pod is not cleared for pool %s", [pool])
}
