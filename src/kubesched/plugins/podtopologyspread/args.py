"""``PodTopologySpreadArgs``: the profile's default spreading constraints, their defaults and validation.

Who reads it: the config loader (``kubesched.config.args_decode`` decodes ``pluginConfig[].args`` into these
classes, then calls ``validate``), the plugin's constructor (which validates again) and ``dump_config``.
Defaults are kube-scheduler v1's ``SetDefaults_PodTopologySpreadArgs`` (``defaultingType`` unset means
``System``); validation is ``ValidatePodTopologySpreadArgs`` with its field paths and messages, every error
reported, in upstream's order (defaultingType first, then per constraint maxSkew, topologyKey,
whenUnsatisfiable, labelSelector, duplicates).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubesched.errors import FieldError
from kubesched.plugins.helper.validation import qualified_name_errors

SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"
DEFAULTING_TYPES = (SYSTEM_DEFAULTING, LIST_DEFAULTING)
"""In upstream's order for its "supported values" message."""

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
WHEN_UNSATISFIABLE = (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY)
"""Sorted, as upstream lists them (``sets.List``)."""

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologySpreadConstraint:
    """A core/v1 TopologySpreadConstraint as a default constraint of the profile.

    Same fields as the pod API; ``label_selector`` must stay unset here (the selector of a default
    constraint is built for each pod from the Services and controllers that select it).
    """

    max_skew: int = 0
    topology_key: str = ""
    when_unsatisfiable: str = ""
    label_selector: dict[str, Any] | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: tuple[str, ...] = ()

    def as_pod_spec(self) -> dict[str, Any]:
        """The constraint as it would appear in a pod's ``topologySpreadConstraints`` (camelCase)."""
        raw: dict[str, Any] = {
            "maxSkew": self.max_skew,
            "topologyKey": self.topology_key,
            "whenUnsatisfiable": self.when_unsatisfiable,
        }
        if self.label_selector is not None:
            raw["labelSelector"] = self.label_selector
        if self.min_domains is not None:
            raw["minDomains"] = self.min_domains
        if self.node_affinity_policy is not None:
            raw["nodeAffinityPolicy"] = self.node_affinity_policy
        if self.node_taints_policy is not None:
            raw["nodeTaintsPolicy"] = self.node_taints_policy
        if self.match_label_keys:
            raw["matchLabelKeys"] = list(self.match_label_keys)
        return raw


SYSTEM_DEFAULT_CONSTRAINTS: tuple[TopologySpreadConstraint, ...] = (
    TopologySpreadConstraint(topology_key=LABEL_HOSTNAME, when_unsatisfiable=SCHEDULE_ANYWAY, max_skew=3),
    TopologySpreadConstraint(topology_key=LABEL_TOPOLOGY_ZONE, when_unsatisfiable=SCHEDULE_ANYWAY, max_skew=5),
)
"""kube-scheduler's built-in defaults for ``defaultingType: System`` (both soft: they only score)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PodTopologySpreadArgs:
    """``PodTopologySpreadArgs``: ``default_constraints`` apply to pods that have no constraints of their own;
    ``defaulting_type`` ``System`` uses kube-scheduler's built-in defaults (and requires the list to be empty),
    ``List`` uses ``default_constraints`` (possibly none at all)."""

    default_constraints: tuple[TopologySpreadConstraint, ...] = ()
    defaulting_type: str = ""

    def __post_init__(self) -> None:
        if not self.defaulting_type:
            object.__setattr__(self, "defaulting_type", SYSTEM_DEFAULTING)

    @property
    def effective_constraints(self) -> tuple[TopologySpreadConstraint, ...]:
        """The default constraints in force: the system ones for System, else the configured list."""
        if self.defaulting_type == SYSTEM_DEFAULTING:
            return SYSTEM_DEFAULT_CONSTRAINTS
        return self.default_constraints

    def validate(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        type_path = _join(path, "defaultingType")
        if self.defaulting_type not in DEFAULTING_TYPES:
            errors.append(FieldError.unsupported(type_path, self.defaulting_type, DEFAULTING_TYPES))
        elif self.defaulting_type == SYSTEM_DEFAULTING and self.default_constraints:
            errors.append(FieldError.invalid(type_path, self.defaulting_type, "when .defaultConstraints are not empty"))
        list_path = _join(path, "defaultConstraints")
        for i, constraint in enumerate(self.default_constraints):
            item = f"{list_path}[{i}]"
            if constraint.max_skew <= 0:
                errors.append(FieldError.invalid(f"{item}.maxSkew", constraint.max_skew, "not in valid range (0, inf)"))
            errors.extend(_topology_key_errors(constraint.topology_key, f"{item}.topologyKey"))
            action_error = _when_unsatisfiable_error(constraint.when_unsatisfiable, f"{item}.whenUnsatisfiable")
            if action_error is not None:
                errors.append(action_error)
            if constraint.label_selector is not None:
                errors.append(
                    FieldError.forbidden(
                        f"{item}.labelSelector", "constraint must not define a selector, as they deduced for each pod"
                    )
                )
            for other in self.default_constraints[:i]:
                if (other.topology_key, other.when_unsatisfiable) == (
                    constraint.topology_key,
                    constraint.when_unsatisfiable,
                ):
                    errors.append(
                        FieldError.duplicate(item, f"{{{constraint.topology_key}, {constraint.when_unsatisfiable}}}")
                    )
                    break
        return errors


def _topology_key_errors(key: str, path: str) -> list[FieldError]:
    if not key:
        return [FieldError.required(path, "can not be empty")]
    return [FieldError.invalid(path, key, message) for message in qualified_name_errors(key)]


def _when_unsatisfiable_error(action: str, path: str) -> FieldError | None:
    if not action:
        return FieldError.required(path, "can not be empty")
    if action not in WHEN_UNSATISFIABLE:
        return FieldError.unsupported(path, action, WHEN_UNSATISFIABLE)
    return None
