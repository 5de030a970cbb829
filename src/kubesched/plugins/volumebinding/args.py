"""``VolumeBindingArgs``, the typed args of VolumeBinding, with kube-scheduler v1.35's defaults and validation.

Decoded by the config loader from ``pluginConfig`` (and defaulted for every profile that enables the plugin);
validated again by the plugin's constructor. In v1.35:

- ``bindTimeoutSeconds`` defaults to 600 and must not be negative (``SetDefaults_VolumeBindingArgs``,
  ``ValidateVolumeBindingArgs``); it bounds how long PreBind waits for the PV controller.
- ``shape`` (the storage-capacity scoring function) belongs to the StorageCapacityScoring feature gate, which
  is alpha and off in v1.35 (beta from v1.37): with the gate off kube-scheduler defaults no shape and rejects
  one that is set, so that a config does not change meaning when the gate turns on. kubesched has no feature
  gates and behaves as v1.35 with its defaults, so ``shape`` is always rejected with upstream's message.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubesched.errors import FieldError

DEFAULT_BIND_TIMEOUT_SECONDS = 600
SHAPE_FORBIDDEN = "unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring"
NEGATIVE_TIMEOUT = "invalid BindTimeoutSeconds, should not be a negative value"


@dataclass(frozen=True, slots=True, kw_only=True)
class UtilizationShapePoint:
    """One point of the capacity-scoring function: utilization 0..100 → score 0..10."""

    utilization: int = 0
    score: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeBindingArgs:
    """``bindTimeoutSeconds`` (>= 0, default 600) and ``shape`` (forbidden: its gate is off in v1.35)."""

    bind_timeout_seconds: int = DEFAULT_BIND_TIMEOUT_SECONDS
    shape: tuple[UtilizationShapePoint, ...] | None = None

    def validate(self, path: str) -> list[FieldError]:
        base = f"{path}." if path else ""
        errors: list[FieldError] = []
        if self.bind_timeout_seconds < 0:
            errors.append(FieldError.invalid(f"{base}bindTimeoutSeconds", self.bind_timeout_seconds, NEGATIVE_TIMEOUT))
        if self.shape is not None:
            shown = [{"utilization": p.utilization, "score": p.score} for p in self.shape]
            errors.append(FieldError.invalid(f"{base}shape", shown, SHAPE_FORBIDDEN))
        return errors
