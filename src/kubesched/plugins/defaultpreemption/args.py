"""Typed args of DefaultPreemption: how many candidate nodes a preemption dry-runs before it chooses.

Who reads it: the config loader (``kubesched.config.args_decode`` decodes ``pluginConfig[].args`` into
:class:`DefaultPreemptionArgs`, then calls ``validate``), the plugin's constructor (which validates again) and
``dump_config``. Defaults are kube-scheduler's ``SetDefaults_DefaultPreemptionArgs``; validation is
``ValidateDefaultPreemptionArgs`` with its field paths and messages, every error reported.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubesched.errors import FieldError

DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE = 10
DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE = 100


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


@dataclass(frozen=True, slots=True, kw_only=True)
class DefaultPreemptionArgs:
    """``DefaultPreemptionArgs``: the share and the least number of potential nodes to find candidates among.

    The number of candidates searched for is ``max(nodes * percentage / 100, absolute)``, capped at the number
    of potential nodes; a smaller number makes preemption cheaper and its choice less good.
    """

    min_candidate_nodes_percentage: int = DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE
    min_candidate_nodes_absolute: int = DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE

    def validate(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        percentage_path = _join(path, "minCandidateNodesPercentage")
        absolute_path = _join(path, "minCandidateNodesAbsolute")
        percentage = self.min_candidate_nodes_percentage
        absolute = self.min_candidate_nodes_absolute
        if not 0 <= percentage <= 100:
            errors.append(FieldError.invalid(percentage_path, percentage, "not in valid range [0, 100]"))
        if absolute < 0:
            errors.append(FieldError.invalid(absolute_path, absolute, "not in valid range [0, inf)"))
        if percentage == 0 and absolute == 0:
            errors.append(
                FieldError.invalid(percentage_path, 0, "cannot be zero at the same time as minCandidateNodesAbsolute")
            )
            errors.append(
                FieldError.invalid(absolute_path, 0, "cannot be zero at the same time as minCandidateNodesPercentage")
            )
        return errors
