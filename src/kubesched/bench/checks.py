"""Cheap after-the-fact checks of a bench run's placements: the bench reports them beside its figures.

A throughput figure means little if the scheduler got faster by placing pods wrongly, so after every run the
final state of the simulated cluster is checked against what the workload asked for:

- every pod the workload created is bound (or was evicted by preemption), except the pods expected to stay
  pending (``expectUnschedulable`` ops, churned pods), which must all be unbound;
- no node holds more cpu, memory or pods than it has allocatable;
- every bound pod's ``nodeSelector`` and required node affinity hold on its node;
- required pod anti-affinity: no other bound pod matching a term shares the term's topology domain;
- required pod affinity: another bound pod matching each term is in the pod's domain, or the pod matches
  its own term and no other pod matches it anywhere (the first pod of a self-affine group);
- ``DoNotSchedule`` topology spread: per constraint, the skew among the eligible nodes' domains (nodes that
  carry the key and match the pod's node affinity: ``nodeAffinityPolicy: Honor``, ``nodeTaintsPolicy:
  Ignore``, the defaults) is at most ``maxSkew``. Each placement keeps that invariant when pods are only
  added, so the final state must satisfy it too.

A hub workload (``multiCluster``) is also checked in its members (:func:`check_members`): no member node holds
more than its allocatable, and every hub pod is in exactly one member.

The checks are written independently of the plugins (they group pods by term once, O(pods x distinct
terms)); forms these workloads do not use (``namespaceSelector`` with requirements, ``matchLabelKeys``,
``minDomains``, non-default policies) are reported as not checked rather than guessed at.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from typing import Any

from kubesched.api.objects import Node, Pod
from kubesched.api.resources import pod_requests
from kubesched.backends.simulated.cluster import SimulatedCluster
from kubesched.federation.wire import HUB_POD_UID_ANNOTATION
from kubesched.plugins.helper.label_selector import LabelSelector, compile_label_selector
from kubesched.plugins.helper.node_selector import compile_node_selector

_SPREAD_POLICIES = (("nodeAffinityPolicy", "Honor"), ("nodeTaintsPolicy", "Ignore"))
MAX_VIOLATIONS = 50  # enough to see the pattern; the count of every kind is kept exact in the message


@dataclass(frozen=True, slots=True)
class CheckReport:
    pending: int
    violations: tuple[str, ...]


class _Violations:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.count = 0

    def add(self, message: str) -> None:
        self.count += 1
        if len(self.items) < MAX_VIOLATIONS:
            self.items.append(message)

    def result(self) -> tuple[str, ...]:
        extra = self.count - len(self.items)
        return (*self.items, f"... and {extra} more") if extra > 0 else tuple(self.items)


@dataclass(frozen=True, slots=True)
class _Term:
    """A pod-affinity term reduced to what the check needs: the namespaces it covers (None: all)."""

    selector: LabelSelector
    namespaces: frozenset[str] | None
    topology_key: str

    def covers(self, pod: Pod) -> bool:
        return (self.namespaces is None or pod.namespace in self.namespaces) and self.selector.matches(
            pod.metadata.labels
        )


def _signature(raw: Mapping[str, Any], namespace: str) -> str:
    return json.dumps([raw, namespace], sort_keys=True, default=str)


def _compile_term(raw: Mapping[str, Any], namespace: str) -> _Term | str:
    selector, errors = compile_label_selector(raw.get("labelSelector") or {})
    if raw.get("labelSelector") is None:
        return "a term without labelSelector (matches nothing)"
    if errors:
        return f"a labelSelector with errors: {errors[0]}"
    if raw.get("matchLabelKeys") or raw.get("mismatchLabelKeys"):
        return "matchLabelKeys/mismatchLabelKeys"
    namespace_selector = raw.get("namespaceSelector")
    namespaces: frozenset[str] | None = frozenset(raw.get("namespaces") or ())
    if namespace_selector is not None:
        if namespace_selector:
            return "a namespaceSelector with requirements"
        namespaces = None  # {} selects every namespace
    elif not namespaces:
        namespaces = frozenset((namespace,))
    return _Term(selector, namespaces, str(raw.get("topologyKey", "")))


def _required_terms(pod: Pod, kind: str) -> list[Mapping[str, Any]]:
    affinity = pod.spec.affinity or {}
    section = affinity.get(kind) or {}
    return list(section.get("requiredDuringSchedulingIgnoredDuringExecution") or [])


def check_placements(cluster: SimulatedCluster, created: Set[str], expected_pending: Set[str]) -> CheckReport:
    violations = _Violations()
    pods = list(cluster.pods.values())
    bound = [pod for pod in pods if pod.spec.node_name]
    pending = [pod for pod in pods if not pod.spec.node_name]
    evicted = {key for victims in cluster.preempted.values() for key in victims}
    _check_outcomes(cluster, created, expected_pending, evicted, violations)
    nodes = cluster.nodes
    _check_resources(nodes, bound, violations)
    _check_node_affinity(nodes, bound, violations)
    _check_pod_affinity(nodes, bound, violations)
    _check_spread(nodes, bound, violations)
    return CheckReport(pending=len(pending), violations=violations.result())


def _check_outcomes(
    cluster: SimulatedCluster, created: Set[str], expected_pending: Set[str], evicted: Set[str], out: _Violations
) -> None:
    unbound = Counter[str]()
    for uid in created:
        pod = cluster.pods.get(uid)
        if pod is None:
            continue  # deleted: checked below against the evictions
        if not pod.spec.node_name:
            unbound[pod.namespace] += 1
    for namespace, count in sorted(unbound.items()):
        out.add(f"{count} pod(s) in namespace {namespace} were not bound")
    gone = [uid for uid in created if uid not in cluster.pods]
    if len(gone) > len(evicted):
        out.add(f"{len(gone) - len(evicted)} pod(s) disappeared without being preempted")
    stray = [cluster.pods[uid] for uid in expected_pending if uid in cluster.pods and cluster.pods[uid].spec.node_name]
    for pod in stray[:5]:
        out.add(f"{pod.key} was expected to stay pending but is bound to {pod.spec.node_name}")
    if len(stray) > 5:
        out.add(f"{len(stray) - 5} more expected-pending pod(s) are bound")


def _check_resources(nodes: Mapping[str, Node], bound: Iterable[Pod], out: _Violations) -> None:
    used: dict[str, Counter[str]] = defaultdict(Counter)
    for pod in bound:
        totals = used[pod.spec.node_name]
        totals["pods"] += 1
        for resource, amount in pod_requests(pod).items():
            totals[resource] += amount
    for name, totals in sorted(used.items()):
        node = nodes.get(name)
        if node is None:
            out.add(f"{totals['pods']} pod(s) bound to node {name}, which does not exist")
            continue
        for resource, amount in sorted(totals.items()):
            if amount > node.allocatable.get(resource, 0):
                out.add(f"node {name}: {resource} requested {amount} > allocatable {node.allocatable.get(resource, 0)}")


def _check_node_affinity(nodes: Mapping[str, Node], bound: Iterable[Pod], out: _Violations) -> None:
    compiled: dict[str, Any] = {}
    for pod in bound:
        node = nodes.get(pod.spec.node_name)
        if node is None:
            continue
        labels = node.metadata.labels
        for key, value in pod.spec.node_selector.items():
            if labels.get(key) != value:
                out.add(f"{pod.key} on {node.metadata.name}: nodeSelector {key}={value} does not hold")
        required = ((pod.spec.affinity or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        if required is None:
            continue
        signature = json.dumps(required, sort_keys=True, default=str)
        selector = compiled.get(signature)
        if selector is None:
            selector = compiled[signature] = compile_node_selector(required)
        if not selector.matches(labels, node.metadata.name):
            out.add(f"{pod.key} on {node.metadata.name}: required node affinity does not hold")


def _domain_counts(nodes: Mapping[str, Node], bound: Iterable[Pod], term: _Term) -> Counter[str]:
    counts = Counter[str]()
    for other in bound:
        if term.covers(other):
            node = nodes.get(other.spec.node_name)
            value = node.metadata.labels.get(term.topology_key) if node is not None else None
            if value is not None:
                counts[value] += 1
    return counts


def _check_pod_affinity(nodes: Mapping[str, Node], bound: list[Pod], out: _Violations) -> None:
    terms: dict[str, _Term | str] = {}
    counts: dict[str, Counter[str]] = {}
    for pod in bound:
        node = nodes.get(pod.spec.node_name)
        if node is None:
            continue
        for kind in ("podAntiAffinity", "podAffinity"):
            for raw in _required_terms(pod, kind):
                signature = _signature(raw, pod.namespace)
                term = terms.get(signature)
                if term is None:
                    term = terms[signature] = _compile_term(raw, pod.namespace)
                    if isinstance(term, str):
                        out.add(f"{kind} with {term}: not checked")
                if isinstance(term, str):
                    continue
                if signature not in counts:
                    counts[signature] = _domain_counts(nodes, bound, term)
                value = node.metadata.labels.get(term.topology_key)
                if value is None:
                    if kind == "podAffinity":
                        out.add(f"{pod.key} on {node.metadata.name}: no {term.topology_key} label for its pod affinity")
                    continue
                in_domain = counts[signature][value]
                if kind == "podAntiAffinity":
                    others = in_domain - (1 if term.covers(pod) else 0)
                    if others > 0:
                        out.add(
                            f"{pod.key} on {node.metadata.name}: {others} pod(s) its required anti-affinity "
                            f"excludes share {term.topology_key}={value}"
                        )
                elif in_domain - (1 if term.covers(pod) else 0) == 0 and not (
                    term.covers(pod) and sum(counts[signature].values()) == 1
                ):
                    # Alone in its domain: right only for the first pod of a group that matches its own term
                    # (while no matching pod existed anywhere), which leaves it the only one of its group.
                    out.add(
                        f"{pod.key} on {node.metadata.name}: no pod its required affinity needs in "
                        f"{term.topology_key}={value}"
                    )


def _check_spread(nodes: Mapping[str, Node], bound: list[Pod], out: _Violations) -> None:
    seen: set[str] = set()
    for pod in bound:
        for raw in pod.spec.topology_spread_constraints:
            if raw.get("whenUnsatisfiable") != "DoNotSchedule":
                continue
            affinity = ((pod.spec.affinity or {}).get("nodeAffinity") or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            )
            signature = json.dumps([raw, pod.namespace, pod.spec.node_selector, affinity], sort_keys=True, default=str)
            if signature in seen:
                continue
            seen.add(signature)
            unsupported = [k for k in ("minDomains", "matchLabelKeys") if raw.get(k)]
            unsupported += [k for k, default in _SPREAD_POLICIES if raw.get(k) not in (None, default)]
            if unsupported:
                out.add(f"topology spread with {', '.join(unsupported)}: not checked")
                continue
            selector, errors = compile_label_selector(raw.get("labelSelector") or {})
            if errors or raw.get("labelSelector") is None:
                out.add("topology spread without a valid labelSelector: not checked")
                continue
            key = str(raw.get("topologyKey", ""))
            node_selector = compile_node_selector(affinity) if affinity is not None else None
            domains = Counter[str]()
            for node in nodes.values():
                labels = node.metadata.labels
                if key not in labels:
                    continue
                if any(labels.get(k) != v for k, v in pod.spec.node_selector.items()):
                    continue
                if node_selector is not None and not node_selector.matches(labels, node.metadata.name):
                    continue
                domains[labels[key]] += 0
            for other in bound:
                if other.namespace != pod.namespace or not selector.matches(other.metadata.labels):
                    continue
                host = nodes.get(other.spec.node_name)
                if host is not None and host.metadata.labels.get(key) in domains:
                    domains[host.metadata.labels[key]] += 1
            if not domains:
                continue
            skew = max(domains.values()) - min(domains.values())
            if skew > int(raw.get("maxSkew", 1)):
                out.add(
                    f"topology spread over {key} in namespace {pod.namespace}: skew {skew} > maxSkew "
                    f"{raw.get('maxSkew')} ({dict(sorted(domains.items()))})"
                )


@dataclass(frozen=True, slots=True)
class MemberContents:
    """What one member cluster's API holds at the end of a hub run: its Node and Pod objects, as stored."""

    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]


def check_members(members: Mapping[str, MemberContents], hub_pods: Set[str]) -> tuple[str, ...]:
    """A hub run's placements as the members hold them: no member node holds more cpu, memory or pods than its
    allocatable (counting every running pod there), and every hub pod (by uid) is in exactly one member, once."""
    violations = _Violations()
    where: dict[str, list[str]] = defaultdict(list)
    for cluster, contents in sorted(members.items()):
        nodes = {node.name: node for node in (Node.from_dict(raw, f"{cluster} Node") for raw in contents.nodes)}
        used: dict[str, Counter[str]] = defaultdict(Counter)
        for raw in contents.pods:
            pod = Pod.from_dict(raw, f"{cluster} Pod")
            hub_uid = pod.metadata.annotations.get(HUB_POD_UID_ANNOTATION, "")
            if hub_uid:
                where[hub_uid].append(f"{cluster}/{pod.key}")
            if pod.status.phase in ("Succeeded", "Failed") or not pod.spec.node_name:
                continue
            if pod.spec.node_name not in nodes:
                violations.add(f"member {cluster}: pod {pod.key} is on node {pod.spec.node_name}, which it lacks")
                continue
            used[pod.spec.node_name].update(pod_requests(pod))
            used[pod.spec.node_name]["pods"] += 1
        for name, amounts in sorted(used.items()):
            allocatable = nodes[name].allocatable
            for resource in ("cpu", "memory", "pods"):
                if amounts[resource] > allocatable.get(resource, 0):
                    violations.add(
                        f"member {cluster}: node {name} holds {amounts[resource]} {resource}, "
                        f"more than its allocatable {allocatable.get(resource, 0)}"
                    )
    for uid in sorted(hub_pods):
        places = where.get(uid, [])
        if len(places) != 1:
            violations.add(f"hub pod {uid} is in {len(places)} members, not exactly one: {places[:3]}")
    for uid in sorted(set(where) - set(hub_pods)):
        violations.add(f"member pod(s) {where[uid][:3]} belong to hub pod {uid}, which the workload never created")
    return violations.result()
