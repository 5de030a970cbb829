"""What PodTopologySpread's filtering, scoring and queueing hints share (upstream ``common.go``).

- :class:`SpreadSelector`: a compiled ``labels.Selector`` with apimachinery's two degenerate forms kept apart:
  a missing ``labelSelector`` selects nothing, ``{}`` has no requirements (it matches every pod, yet counts no
  existing pod: kube-scheduler skips counting for a selector without requirements);
- :func:`constraints_for`: a pod's constraints of one ``whenUnsatisfiable`` action, parsed once per call
  (PreFilter parses the hard ones, PreScore the soft ones), ``matchLabelKeys`` merged into the selector from
  the pod's labels, or the profile's default constraints with the selector built from the Services,
  ReplicationControllers, ReplicaSets and StatefulSets selecting the pod (``helper.DefaultSelector``);
- :func:`count_matching_pods`, :func:`node_has_all_keys`, :class:`NodeInclusion`: the counting rules;
- :func:`topology_column`: one NodeTable class column per topology key (the node's label value), for the
  batch paths.

A constraint that cannot be read (a value of the wrong type, a selector apimachinery would refuse) raises
:class:`ConstraintError`, whose message names the pod and the field; the plugin turns it into the Error status
kube-scheduler returns, so it never escapes the cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesched.api.objects import Pod, Toleration
from kubesched.errors import FieldError
from kubesched.framework.listers import Listers
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.plugins.helper.classes import label_value
from kubesched.plugins.helper.label_selector import compile_label_selector
from kubesched.plugins.helper.node_selector import (
    IN,
    LabelRequirement,
    RequiredNodeAffinity,
    aggregate_message,
    compile_node_selector,
)
from kubesched.plugins.helper.taints import find_untolerated_do_not_schedule_taint
from kubesched.plugins.podtopologyspread.args import LABEL_HOSTNAME, TopologySpreadConstraint

HONOR = "Honor"
IGNORE = "Ignore"

_RC_KIND = ("v1", "ReplicationController")
_RS_KIND = ("apps/v1", "ReplicaSet")
_SS_KIND = ("apps/v1", "StatefulSet")


class ConstraintError(ValueError):
    """A topology spread constraint that cannot be used; the message is the one the cycle reports."""


@dataclass(frozen=True, slots=True)
class SpreadSelector:
    """``requirements is None`` selects nothing (a missing labelSelector); ``()`` matches every pod."""

    requirements: tuple[LabelRequirement, ...] | None

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.requirements is None:
            return False
        return all(requirement.matches(labels) for requirement in self.requirements)

    @property
    def counts_pods(self) -> bool:
        """False when counting is skipped: no requirements at all (upstream's ``selector.Empty()``), or a
        selector that matches nothing anyway."""
        return bool(self.requirements)

    def merged_with_labels(self, labels: Mapping[str, str]) -> SpreadSelector:
        """``mergeLabelSetWithSelector``: equality requirements for ``labels`` ANDed with mine; a selector
        that selects nothing stays so."""
        if self.requirements is None:
            return self
        added = tuple(LabelRequirement(key, IN, frozenset((labels[key],))) for key in sorted(labels))
        return SpreadSelector(added + self.requirements)


NOTHING = SpreadSelector(None)


@dataclass(frozen=True, slots=True)
class Constraint:
    """A parsed constraint (upstream's internal ``topologySpreadConstraint``)."""

    max_skew: int
    topology_key: str
    selector: SpreadSelector
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE


def node_has_all_keys(labels: Mapping[str, str], constraints: Sequence[Constraint]) -> bool:
    """Whether the node carries every constraint's topology key (``nodeLabelsMatchSpreadConstraints``)."""
    return all(c.topology_key in labels for c in constraints)


def count_matching_pods(
    pods: Mapping[str, PodInfo] | Sequence[PodInfo], selector: SpreadSelector, namespace: str
) -> int:
    """Pods of ``namespace``, not terminating, that ``selector`` matches (``countPodsMatchSelector``)."""
    if not selector.counts_pods:
        return 0
    infos = pods.values() if isinstance(pods, Mapping) else pods
    count = 0
    for info in infos:
        meta = info.pod.metadata
        if meta.deletion_timestamp is not None or meta.namespace != namespace:
            continue
        if selector.matches(meta.labels):
            count += 1
    return count


def pod_labels_match(constraints: Sequence[Constraint], labels: Mapping[str, str]) -> bool:
    """Whether any constraint's selector matches ``labels`` (``podLabelsMatchSpreadConstraints``)."""
    return any(c.selector.matches(labels) for c in constraints)


def required_node_affinity(pod: Pod) -> RequiredNodeAffinity:
    """The pod's nodeSelector AND required node-affinity terms; terms that do not parse match nothing
    (component-helpers' lazy selector, whose errors kube-scheduler ignores here)."""
    affinity = pod.spec.affinity
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    required = (
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(node_affinity, Mapping)
        else None
    )
    return RequiredNodeAffinity(
        tuple(sorted(pod.spec.node_selector.items())),
        compile_node_selector(required) if required is not None else None,
    )


class NodeInclusion:
    """Which nodes count for a constraint: ``nodeAffinityPolicy: Honor`` keeps the nodes matching the pod's
    nodeSelector/required affinity, ``nodeTaintsPolicy: Honor`` the nodes whose NoSchedule/NoExecute taints the
    pod tolerates. Each test is evaluated at most once per node, since constraints share them."""

    __slots__ = ("_affinity", "_tolerations")

    def __init__(self, pod: Pod) -> None:
        self._affinity = required_node_affinity(pod)
        self._tolerations: tuple[Toleration, ...] = pod.spec.tolerations

    @property
    def affinity(self) -> RequiredNodeAffinity:
        return self._affinity

    @property
    def tolerations(self) -> tuple[Toleration, ...]:
        return self._tolerations

    def affinity_matches(self, info: NodeInfo) -> bool:
        return self._affinity.matches(info.labels, info.name)

    def taints_tolerated(self, info: NodeInfo) -> bool:
        return find_untolerated_do_not_schedule_taint(info.taints, self._tolerations) is None

    def node_filter(self, info: NodeInfo) -> Callable[[Constraint], bool]:
        """A per-constraint test for ``info`` that computes each policy's answer on first use."""
        cache: dict[str, bool] = {}

        def included(constraint: Constraint) -> bool:
            if constraint.node_affinity_policy == HONOR:
                if "affinity" not in cache:
                    cache["affinity"] = self.affinity_matches(info)
                if not cache["affinity"]:
                    return False
            if constraint.node_taints_policy == HONOR:
                if "taints" not in cache:
                    cache["taints"] = self.taints_tolerated(info)
                if not cache["taints"]:
                    return False
            return True

        return included


# ---- parsing --------------------------------------------------------------------------------------

_FIELD = "spec.topologySpreadConstraints"


def _fail(pod: Pod, path: str, value: object, expected: str) -> ConstraintError:
    return ConstraintError(f"pod {pod.key}: {FieldError.invalid(path, value, f'must be of type {expected}')}")


def _int(raw: Mapping[str, Any], key: str, pod: Pod, path: str, default: int | None) -> int | None:
    value: object = raw.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(pod, f"{path}.{key}", value, "integer")
    return value


def _str(raw: Mapping[str, Any], key: str, pod: Pod, path: str) -> str | None:
    value: object = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _fail(pod, f"{path}.{key}", value, "string")
    return value


def _selector(raw: object, pod: Pod, path: str) -> SpreadSelector:
    """``metav1.LabelSelectorAsSelector``: nil selects nothing; otherwise the compiled requirements."""
    if raw is None:
        return NOTHING
    selector, errors = compile_label_selector(raw, path)
    if errors:
        for error in errors:
            # apimachinery's wording for the one error users meet most (a node-selector operator here).
            if error.path.endswith(".operator") and "not a valid selector operator" in error.detail:
                raise ConstraintError(f'"{error.value}" is not a valid label selector operator')
        raise ConstraintError(f"pod {pod.key}: {aggregate_message(errors)}")
    return SpreadSelector(selector.requirements)


def _checked_raw(pod: Pod, raw: Mapping[str, Any], path: str) -> tuple[int, str, str, list[str]]:
    """The fields every constraint must have the right type for (a malformed pod fails as a whole)."""
    max_skew = _int(raw, "maxSkew", pod, path, 0)
    topology_key = _str(raw, "topologyKey", pod, path) or ""
    action = _str(raw, "whenUnsatisfiable", pod, path) or ""
    keys_raw = raw.get("matchLabelKeys")
    keys: list[str] = []
    if keys_raw is not None:
        if not isinstance(keys_raw, list):
            raise _fail(pod, f"{path}.matchLabelKeys", keys_raw, "array")
        for i, key in enumerate(keys_raw):
            if not isinstance(key, str):
                raise _fail(pod, f"{path}.matchLabelKeys[{i}]", key, "string")
            keys.append(key)
    _int(raw, "minDomains", pod, path, None)
    _str(raw, "nodeAffinityPolicy", pod, path)
    _str(raw, "nodeTaintsPolicy", pod, path)
    assert max_skew is not None
    return max_skew, topology_key, action, keys


def parse_constraints(
    pod: Pod, raw_constraints: Sequence[Mapping[str, Any]], action: str, *, base: str = _FIELD
) -> list[Constraint]:
    """``filterTopologySpreadConstraints``: the constraints whose ``whenUnsatisfiable`` is ``action``.

    Only those constraints' selectors are compiled, as upstream does; an unknown ``whenUnsatisfiable`` is
    neither hard nor soft and so is never used. Raises :class:`ConstraintError`.
    """
    result: list[Constraint] = []
    for i, raw in enumerate(raw_constraints):
        path = f"{base}[{i}]"
        max_skew, topology_key, when, match_label_keys = _checked_raw(pod, raw, path)
        if when != action:
            continue
        selector = _selector(raw.get("labelSelector"), pod, f"{path}.labelSelector")
        if match_label_keys:
            pod_labels = pod.metadata.labels
            present = {key: pod_labels[key] for key in match_label_keys if key in pod_labels}
            if present:
                selector = selector.merged_with_labels(present)
        min_domains = _int(raw, "minDomains", pod, path, None)
        result.append(
            Constraint(
                max_skew=max_skew,
                topology_key=topology_key,
                selector=selector,
                min_domains=1 if min_domains is None else min_domains,
                node_affinity_policy=_str(raw, "nodeAffinityPolicy", pod, path) or HONOR,
                node_taints_policy=_str(raw, "nodeTaintsPolicy", pod, path) or IGNORE,
            )
        )
    return result


def default_selector(pod: Pod, listers: Listers) -> SpreadSelector:
    """``helper.DefaultSelector``: the selectors of the Services selecting the pod, then of its controller
    (a v1 ReplicationController, an apps/v1 ReplicaSet or StatefulSet), ANDed."""
    namespace = pod.metadata.namespace
    pod_labels = pod.metadata.labels
    label_set: dict[str, str] = {}
    for service in listers.services.list(namespace):
        selector = service.selector
        if selector is None:
            continue  # a Service without a selector selects nothing, not everything
        if all(pod_labels.get(k) == v for k, v in selector.items()):
            label_set.update(selector)
    owner = pod.metadata.controller_ref()
    if not label_set and owner is None:
        # No Service and no controller selects the pod (every pod of SchedulingBasic, every cycle): the one
        # empty selector, without building a tuple of no requirements.
        return _NOTHING_REQUIRED
    requirements = _label_set_requirements(label_set)
    if owner is None:
        return SpreadSelector(requirements)
    kind = (owner.api_version, owner.kind)
    if kind == _RC_KIND:
        rc = listers.replication_controllers.get(namespace, owner.name)
        if rc is not None:
            label_set.update(rc.selector)
            requirements = _label_set_requirements(label_set)
    elif kind in (_RS_KIND, _SS_KIND):
        workload = (
            listers.replica_sets.get(namespace, owner.name)
            if kind == _RS_KIND
            else listers.stateful_sets.get(namespace, owner.name)
        )
        if workload is not None:
            compiled, errors = compile_label_selector(workload.selector.raw)
            if not errors:
                requirements = requirements + compiled.requirements
    return SpreadSelector(requirements)


_NOTHING_REQUIRED = SpreadSelector(())


def _label_set_requirements(label_set: Mapping[str, str]) -> tuple[LabelRequirement, ...]:
    return tuple(LabelRequirement(key, IN, frozenset((label_set[key],))) for key in sorted(label_set))


def default_constraints(
    pod: Pod, defaults: Sequence[TopologySpreadConstraint], action: str, listers: Listers
) -> list[Constraint]:
    """``buildDefaultConstraints``: the profile's default constraints of ``action``, every one with the
    pod's default selector; none when that selector has no requirements."""
    return with_default_selector(pod, parse_default_constraints(pod, defaults, action), listers)


def parse_default_constraints(
    pod: Pod, defaults: Sequence[TopologySpreadConstraint], action: str
) -> list[Constraint]:
    """The default constraints of ``action`` as parsed for ``pod``. Their selectors are replaced by the pod's
    default selector afterwards, so the result is the same for every pod and may be kept."""
    raw = [constraint.as_pod_spec() for constraint in defaults]
    return parse_constraints(pod, raw, action, base="defaultConstraints")


def with_default_selector(pod: Pod, constraints: Sequence[Constraint], listers: Listers) -> list[Constraint]:
    """``constraints``, each with the pod's default selector; none when that selector has no requirements."""
    if not constraints:
        return []
    selector = default_selector(pod, listers)
    if not selector.requirements:
        return []
    return [
        Constraint(c.max_skew, c.topology_key, selector, c.min_domains, c.node_affinity_policy, c.node_taints_policy)
        for c in constraints
    ]


# ---- batch support ---------------------------------------------------------------------------------


# The node-label-value column every plugin shares for a key (one NodeTable column, not one per plugin).
topology_column = label_value


def is_hostname(constraint: Constraint) -> bool:
    return constraint.topology_key == LABEL_HOSTNAME
