"""The typed listers: get by key, list per namespace and across namespaces, add/update/delete/replace, the
bundle built from loaded manifests, and the simulated cluster exposing it."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from typing import Any

import pytest

from kubesched.api.manifests import LoadedManifests, load_manifest_text
from kubesched.api.objects import Namespace
from kubesched.api.workloads import Service
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.clock import VirtualClock
from kubesched.framework.listers import ClusterStore, Listers, ListerStores, NamespacedStore


def service(name: str, namespace: str = "default", **selector: str) -> Service:
    raw: dict[str, Any] = {"kind": "Service", "metadata": {"name": name, "namespace": namespace}}
    if selector:
        raw["spec"] = {"selector": selector}
    return Service.from_dict(raw, f"test: Service {namespace}/{name}")


def namespace(name: str, **labels: str) -> Namespace:
    return Namespace.from_dict({"kind": "Namespace", "metadata": {"name": name, "labels": labels}}, "test")


def keys(objects: Any) -> list[str]:
    return [f"{o.metadata.namespace}/{o.metadata.name}" for o in objects]


# ---------------------------------------------------------------- NamespacedStore

STORE = [service("a", "prod"), service("b", "prod"), service("a", "dev"), service("c", "default")]


@pytest.mark.parametrize(
    ("ns", "name", "found"),
    [
        pytest.param("prod", "a", "prod/a", id="found"),
        pytest.param("dev", "a", "dev/a", id="same-name-other-namespace"),
        pytest.param("dev", "b", None, id="name-only-in-other-namespace"),
        pytest.param("nowhere", "a", None, id="unknown-namespace"),
        pytest.param("", "c", None, id="namespaced-objects-need-their-namespace"),
    ],
)
def test_namespaced_get(ns: str, name: str, found: str | None) -> None:
    got = NamespacedStore(STORE).get(ns, name)
    assert (keys([got])[0] if got is not None else None) == found


@pytest.mark.parametrize(
    ("ns", "expected"),
    [
        pytest.param("prod", ["prod/a", "prod/b"], id="one-namespace-in-stored-order"),
        pytest.param("dev", ["dev/a"], id="other-namespace"),
        pytest.param("empty", [], id="unknown-namespace-is-empty"),
        pytest.param(None, ["prod/a", "prod/b", "dev/a", "default/c"], id="every-namespace"),
    ],
)
def test_namespaced_list(ns: str | None, expected: list[str]) -> None:
    assert keys(NamespacedStore(STORE).list(ns)) == expected


def test_namespaced_add_update_delete() -> None:
    store: NamespacedStore[Service] = NamespacedStore()
    first = service("web", "prod", app="web")
    assert store.add(first) is None
    assert len(store) == 1

    # An update replaces the object in place (order kept) and hands back the one it replaced.
    store.add(service("api", "prod"))
    second = replace(first, selector={"app": "web2"})
    assert store.update(second) is first
    assert store.get("prod", "web") is second
    assert keys(store.list("prod")) == ["prod/web", "prod/api"]
    assert len(store) == 2

    # An add of a known key is an update too (what an informer's relist delivers).
    third = replace(first, selector={"app": "web3"})
    assert store.add(third) is second
    assert len(store) == 2

    assert store.delete("prod", "web") is third
    assert store.get("prod", "web") is None
    assert store.delete("prod", "web") is None
    assert store.delete("nowhere", "web") is None
    assert len(store) == 1
    assert store.delete("prod", "api") is not None
    assert (store.list("prod"), store.list(), len(store)) == ((), (), 0)


def test_namespaced_list_is_a_snapshot() -> None:
    store = NamespacedStore([service("a", "prod")])
    listed = store.list("prod")
    store.add(service("b", "prod"))
    store.delete("prod", "a")
    assert keys(listed) == ["prod/a"]
    assert keys(store.list("prod")) == ["prod/b"]


def test_namespaced_replace() -> None:
    store = NamespacedStore([service("a", "prod"), service("b", "dev")])
    store.replace([service("c", "prod")])
    assert (keys(store.list()), len(store)) == (["prod/c"], 1)


# ---------------------------------------------------------------- ClusterStore


def test_cluster_store() -> None:
    store = ClusterStore([namespace("prod", team="a"), namespace("dev")])
    prod = store.get("prod")
    assert prod is not None and prod.metadata.labels == {"team": "a"}
    assert store.get("nope") is None
    assert [n.metadata.name for n in store.list()] == ["prod", "dev"]

    relabelled = namespace("prod", team="b")
    old = store.update(relabelled)
    assert old is not None and old.metadata.labels == {"team": "a"}
    assert store.get("prod") is relabelled
    assert [n.metadata.name for n in store.list()] == ["prod", "dev"]

    assert store.delete("dev") is not None
    assert store.delete("dev") is None
    assert (len(store), [n.metadata.name for n in store.list()]) == (1, ["prod"])

    store.replace([namespace("x")])
    assert [n.metadata.name for n in store.list()] == ["x"]


# ---------------------------------------------------------------- the bundle

CLUSTER = textwrap.dedent(
    """\
    apiVersion: v1
    kind: Namespace
    metadata: {name: prod, labels: {team: a}}
    ---
    apiVersion: scheduling.k8s.io/v1
    kind: PriorityClass
    metadata: {name: high}
    value: 1000
    ---
    apiVersion: policy/v1
    kind: PodDisruptionBudget
    metadata: {name: web, namespace: prod}
    spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}
    ---
    apiVersion: v1
    kind: Service
    metadata: {name: web, namespace: prod}
    spec: {selector: {app: web}}
    ---
    apiVersion: apps/v1
    kind: ReplicaSet
    metadata: {name: web-1, namespace: prod}
    spec: {selector: {matchLabels: {app: web}}}
    ---
    apiVersion: v1
    kind: ReplicationController
    metadata: {name: old, namespace: prod}
    spec: {selector: {app: old}}
    ---
    apiVersion: apps/v1
    kind: StatefulSet
    metadata: {name: db, namespace: prod}
    spec: {selector: {matchLabels: {app: db}}}
    ---
    apiVersion: v1
    kind: PersistentVolume
    metadata: {name: pv-1}
    spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce]}
    ---
    apiVersion: v1
    kind: PersistentVolumeClaim
    metadata: {name: data, namespace: prod}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
    ---
    apiVersion: storage.k8s.io/v1
    kind: StorageClass
    metadata: {name: fast}
    provisioner: p
    ---
    apiVersion: storage.k8s.io/v1
    kind: CSINode
    metadata: {name: n1}
    spec: {drivers: []}
    """
)


def test_listers_from_loaded_manifests() -> None:
    listers = Listers.from_objects(load_manifest_text(CLUSTER))
    assert listers.namespaces.get("prod") is not None
    assert listers.priority_classes.get("high") is not None
    assert keys(listers.pod_disruption_budgets.list("prod")) == ["prod/web"]
    assert listers.services.get("prod", "web") is not None
    assert listers.replica_sets.get("prod", "web-1") is not None
    assert listers.replication_controllers.get("prod", "old") is not None
    assert listers.stateful_sets.get("prod", "db") is not None
    assert listers.persistent_volumes.get("pv-1") is not None
    assert listers.persistent_volume_claims.get("prod", "data") is not None
    assert listers.storage_classes.get("fast") is not None
    assert listers.csi_nodes.get("n1") is not None
    assert listers.services.list("default") == ()


def test_empty_listers_find_nothing() -> None:
    listers = Listers.empty()
    assert listers.services.get("default", "x") is None
    assert listers.csi_nodes.list() == ()
    assert Listers.from_objects(LoadedManifests()).persistent_volume_claims.list() == ()


def test_store_changes_show_through_the_listers() -> None:
    stores = ListerStores.from_objects(load_manifest_text(CLUSTER))
    listers = stores.listers()
    stores.services.add(service("api", "prod", app="api"))
    stores.persistent_volumes.delete("pv-1")
    assert keys(listers.services.list("prod")) == ["prod/web", "prod/api"]
    assert listers.persistent_volumes.get("pv-1") is None


def test_simulated_cluster_exposes_listers() -> None:
    loaded = load_manifest_text(CLUSTER)
    cluster = SimulatedCluster(VirtualClock(), loaded.nodes, loaded.pods, listers=Listers.from_objects(loaded))
    assert cluster.listers.storage_classes.get("fast") is not None
    assert SimulatedCluster(VirtualClock()).listers.services.list() == ()
