"""InterPodAffinity's per-node view of the pods that matter, derived once per NodeInfo object.

The scheduler cache only counts a node's pods with affinity terms (``NodeInfo.pods_with_affinity``, from each
PodInfo's ``has_pod_affinity``) and keeps no lists of them, so the plugin derives them itself: for each node, its
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
    # What the next view of the node starts from instead of walking every pod again: the pods with terms by
    # uid, and per group a sample (any pod of the group: only its namespace and labels are read) and a count.
    by_uid: Mapping[str, tuple[PodInfo, PodTerms]]
    samples: Mapping[GroupKey, Pod]
    counts: Mapping[GroupKey, int]


def _group_key(pod: Pod) -> GroupKey:
    return (pod.metadata.namespace, frozenset(pod.metadata.labels.items()))


def node_pods(info: NodeInfo, previous: NodePods | None, parse: Callable[[PodInfo], PodTerms]) -> NodePods:
    """``info``'s view, reusing the parsed terms of the PodInfos ``previous`` (the node's last view) still has.

    With a previous view, only the pods that changed are looked at (the difference of the two NodeInfos' pod
    maps, over the chunks they do not share): a node that gains one pod per cycle — a DaemonSet's target, a
    packed node — costs O(changes), not O(pods on the node), per cycle. :func:`fresh_node_pods` is the
    reference it equals.
    """
    if previous is None:
        return fresh_node_pods(info, parse)
    removed, added = info.pods.changes_since(previous.info.pods)
    by_uid = dict(previous.by_uid)
    samples = dict(previous.samples)
    counts = dict(previous.counts)
    term_counts = dict(previous.term_counts)
    for uid, pod_info in removed:
        key = _group_key(pod_info.pod)
        left = counts[key] - 1
        if left:
            counts[key] = left
        else:
            del counts[key], samples[key]
        entry = by_uid.pop(uid, None)
        if entry is not None:
            _count_terms(term_counts, entry[1], -1)
    for uid, pod_info in added:
        pod = pod_info.pod
        key = _group_key(pod)
        counts[key] = counts.get(key, 0) + 1
        samples.setdefault(key, pod)
        if pod_info.has_pod_affinity:
            known = previous.by_uid.get(uid)
            # Terms depend on the Pod alone; a pod re-wrapped in a new PodInfo (assumed, then bound) keeps them.
            terms = known[1] if known is not None and known[0].pod is pod else parse(pod_info)
            by_uid[uid] = (pod_info, terms)
            _count_terms(term_counts, terms, 1)
    return _view(info, by_uid, samples, counts, {k: v for k, v in term_counts.items() if v})


def fresh_node_pods(info: NodeInfo, parse: Callable[[PodInfo], PodTerms]) -> NodePods:
    """``info``'s view from all its pods (the reference :func:`node_pods` is held equal to)."""
    by_uid: dict[str, tuple[PodInfo, PodTerms]] = {}
    samples: dict[GroupKey, Pod] = {}
    counts: dict[GroupKey, int] = {}
    term_counts: dict[TermKey, int] = {}
    for uid, pod_info in info.pods.items():
        pod = pod_info.pod
        if pod_info.has_pod_affinity:
            terms = parse(pod_info)
            by_uid[uid] = (pod_info, terms)
            _count_terms(term_counts, terms, 1)
        key = _group_key(pod)
        samples.setdefault(key, pod)
        counts[key] = counts.get(key, 0) + 1
    return _view(info, by_uid, samples, counts, term_counts)


def _view(
    info: NodeInfo,
    by_uid: dict[str, tuple[PodInfo, PodTerms]],
    samples: dict[GroupKey, Pod],
    counts: dict[GroupKey, int],
    term_counts: dict[TermKey, int],
) -> NodePods:
    with_affinity = tuple(by_uid.values())
    anti = tuple(entry for entry in with_affinity if entry[1].has_required_anti_affinity)
    groups = tuple(PodGroup(key, sample, counts[key]) for key, sample in samples.items())
    return NodePods(info, with_affinity, anti, groups, term_counts, by_uid, samples, counts)


def _count_terms(out: dict[TermKey, int], terms: PodTerms, delta: int) -> None:
    for term in terms.required_affinity:
        out[(REQUIRED_AFFINITY, term, 0)] = out.get((REQUIRED_AFFINITY, term, 0), 0) + delta
    for term in terms.required_anti_affinity:
        out[(REQUIRED_ANTI_AFFINITY, term, 0)] = out.get((REQUIRED_ANTI_AFFINITY, term, 0), 0) + delta
    for weighted in terms.preferred_affinity:
        key = (PREFERRED_AFFINITY, weighted.term, weighted.weight)
        out[key] = out.get(key, 0) + delta
    for weighted in terms.preferred_anti_affinity:
        key = (PREFERRED_ANTI_AFFINITY, weighted.term, weighted.weight)
        out[key] = out.get(key, 0) + delta
