package kubesched.clusters_test

import rego.v1

import data.kubesched.clusters

eu_pod := {"metadata": {"namespace": "shop", "labels": {"multicluster.kubesched.io/data-residency": "eu"}}}

cluster(region) := {"metadata": {"name": "c", "labels": {"topology.kubernetes.io/region": region}}}

test_eu_pod_allowed_in_eu if {
	clusters.allow with input as {"pod": eu_pod, "cluster": cluster("eu-west")}
}

test_eu_pod_denied_in_us if {
	not clusters.allow with input as {"pod": eu_pod, "cluster": cluster("us-east")}
}

test_pod_without_residency_allowed_anywhere if {
	clusters.allow with input as {"pod": {"metadata": {"namespace": "shop"}}, "cluster": cluster("ap-south")}
}

test_frozen_cluster_denied if {
	frozen := {"metadata": {"name": "c", "annotations": {"multicluster.kubesched.io/change-freeze": "true"}}}
	not clusters.allow with input as {"pod": {"metadata": {"namespace": "shop"}}, "cluster": frozen}
}
