"""``InterPodAffinityArgs``: fields, kube-scheduler's defaults, validation with field paths.

Who reads it: the config loader (``kubesched.config.args_decode`` decodes ``pluginConfig[].args`` into it and
calls ``validate``), the plugin's constructor (which validates again) and ``dump_config``. Defaults are
``SetDefaults_InterPodAffinityArgs`` (hardPodAffinityWeight 1); validation is ``ValidateInterPodAffinityArgs``
with upstream's message.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubesched.errors import FieldError

DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1
MIN_HARD_POD_AFFINITY_WEIGHT = 0
MAX_HARD_POD_AFFINITY_WEIGHT = 100


@dataclass(frozen=True, slots=True, kw_only=True)
class InterPodAffinityArgs:
    """``hard_pod_affinity_weight``: the score an existing pod's *required* affinity term that matches the
    incoming pod adds to its topology domain (0 turns that off). ``ignore_preferred_terms_of_existing_pods``:
    when the incoming pod has no preferred terms, skip scoring instead of reading existing pods' terms."""

    hard_pod_affinity_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT
    ignore_preferred_terms_of_existing_pods: bool = False

    def validate(self, path: str) -> list[FieldError]:
        weight = self.hard_pod_affinity_weight
        if MIN_HARD_POD_AFFINITY_WEIGHT <= weight <= MAX_HARD_POD_AFFINITY_WEIGHT:
            return []
        where = f"{path}.hardPodAffinityWeight" if path else "hardPodAffinityWeight"
        detail = f"not in valid range [{MIN_HARD_POD_AFFINITY_WEIGHT}-{MAX_HARD_POD_AFFINITY_WEIGHT}]"
        return [FieldError.invalid(where, weight, detail)]
