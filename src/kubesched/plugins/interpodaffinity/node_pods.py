"""InterPodAffinity's per-node view of the pods that matter, derived once per NodeInfo object.

The scheduler cache keeps no "pods with affinity" lists, so the plugin derives them itself: for each node, its
pods with affinity terms (with their parsed terms), those with required anti-affinity, every pod grouped by
(namespace, labels) — all that an incoming pod's terms can see of a pod — and how many times each distinct
existing-pod term (by kind, term and weight) occurs on the node.

Who calls it: :class:`~kubesched.plugins.interpodaffinity.inter_pod_affinity.InterPodAffinity`, which caches one
:class:`NodePods` per node name and reuses it while the snapshot hands it the very same NodeInfo object (snapshot
NodeInfos are immutable copies); the reference loops read the lists and groups, the array paths of
:mod:`~kubesched.plugins.interpodaffinity.counting` read the groups and the term counts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from kubesched.api.objects import Pod
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.interpodaffinity.terms import AffinityTerm, PodTerms

GroupKey = tuple[str, frozenset[tuple[str, str]]]

# The four kinds of an existing pod's terms, as the first element of a TermKey.
REQUIRED_AFFINITY: Final = 0
REQUIRED_ANTI_AFFINITY: Final = 1
PREFERRED_AFFINITY: Final = 2
PREFERRED_ANTI_AFFINITY: Final = 3

TermKey = tuple[int, AffinityTerm, int]
"""(kind, term, weight): one distinct term of existing pods; the weight is 0 for required terms."""


@dataclass(frozen=True, slots=True)
class PodGroup:
    """Pods of one node that the incoming pod's terms cannot tell apart: same namespace, same labels."""

    key: GroupKey
    sample: Pod
    count: int


@dataclass(frozen=True, slots=True)
class NodePods:
    info: NodeInfo
    with_affinity: tuple[tuple[PodInfo, PodTerms], ...]
    with_required_anti_affinity: tuple[tuple[PodInfo, PodTerms], ...]
    groups: tuple[PodGroup, ...]
    """Every pod of the node, grouped by (namespace, labels)."""
    term_counts: Mapping[TermKey, int]
    """How many times each existing-pod term occurs among the node's pods (a pod listing a term twice counts
    twice, as the reference loops credit it twice)."""


def node_pods(info: NodeInfo, previous: NodePods | None, parse: Callable[[PodInfo], PodTerms]) -> NodePods:
    """``info``'s view, reusing the parsed terms of the PodInfos ``previous`` (the node's last view) still has."""
    reusable: dict[str, tuple[PodInfo, PodTerms]] = {}
    if previous is not None:
        reusable = {pod_info.uid: (pod_info, terms) for pod_info, terms in previous.with_affinity}
    with_affinity: list[tuple[PodInfo, PodTerms]] = []
    samples: dict[GroupKey, Pod] = {}
    counts: dict[GroupKey, int] = {}
    for pod_info in info.pods.values():
        pod = pod_info.pod
        affinity = pod.spec.affinity
        if affinity and (affinity.get("podAffinity") is not None or affinity.get("podAntiAffinity") is not None):
            known = reusable.get(pod_info.uid)
            # Terms depend on the Pod alone; a pod re-wrapped in a new PodInfo (assumed, then bound) keeps them.
            terms = known[1] if known is not None and known[0].pod is pod_info.pod else parse(pod_info)
            with_affinity.append((pod_info, terms))
        key = (pod.metadata.namespace, frozenset(pod.metadata.labels.items()))
        if key not in samples:
            samples[key] = pod
        counts[key] = counts.get(key, 0) + 1
    groups = tuple(PodGroup(key, sample, counts[key]) for key, sample in samples.items())
    anti = tuple(entry for entry in with_affinity if entry[1].has_required_anti_affinity)
    return NodePods(info, tuple(with_affinity), anti, groups, _term_counts(with_affinity))


def _term_counts(with_affinity: list[tuple[PodInfo, PodTerms]]) -> dict[TermKey, int]:
    out: dict[TermKey, int] = {}

    def add(key: TermKey) -> None:
        out[key] = out.get(key, 0) + 1

    for _, terms in with_affinity:
        for term in terms.required_affinity:
            add((REQUIRED_AFFINITY, term, 0))
        for term in terms.required_anti_affinity:
            add((REQUIRED_ANTI_AFFINITY, term, 0))
        for weighted in terms.preferred_affinity:
            add((PREFERRED_AFFINITY, weighted.term, weighted.weight))
        for weighted in terms.preferred_anti_affinity:
            add((PREFERRED_ANTI_AFFINITY, weighted.term, weighted.weight))
    return out
