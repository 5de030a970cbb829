# Unit tests for placement.rego; run with `opa test examples/policies` or `kubesched policy test examples/policies`.
package kubernetes.authz_test

import rego.v1

import data.kubernetes.authz

pod(ns, image) := {"metadata": {"namespace": ns, "labels": {}}, "spec": {"containers": [{"name": "c", "image": image}]}}

node(name) := {"metadata": {"name": name, "labels": {}}, "spec": {}}

test_trusted_pod_on_known_node_is_allowed if {
	authz.allow with input as {"pod": pod("default", "nginx:1.27"), "node": node("node-a")}
}

test_unknown_node_is_denied if {
	not authz.allow with input as {"pod": pod("default", "nginx:1.27"), "node": node("node-x")}
	"no compliance record for the node" in authz.deny with input as {"pod": pod("default", "nginx:1.27"), "node": node("node-x")}
}

test_malformed_input_is_denied if {
	not authz.allow with input as {"pod": {}, "node": {}}
}

test_prod_needs_pci if {
	not authz.allow with input as {"pod": pod("prod", "nginx:1.27"), "node": node("node-e")}
	authz.allow with input as {"pod": pod("prod", "nginx:1.27"), "node": node("node-a")}
}

test_untrusted_image_is_denied if {
	"image evil.example.com/miner:1 is not from a trusted registry" in authz.deny with input as {"pod": pod("default", "evil.example.com/miner:1"), "node": node("node-a")}
}

test_restricted_pool_needs_clearance if {
	restricted := {"metadata": {"name": "node-b", "labels": {"security.example.com/pool": "restricted-gpu"}}, "spec": {}}
	not authz.allow with input as {"pod": pod("ml", "trainer:1.0"), "node": restricted}
	cleared := object.union(pod("ml", "trainer:1.0"), {"metadata": {"namespace": "ml", "labels": {"security.example.com/clearance": "restricted-gpu"}}})
	authz.allow with input as {"pod": cleared, "node": restricted}
}
