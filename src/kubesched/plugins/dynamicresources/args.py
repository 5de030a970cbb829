"""``DynamicResourcesArgs``, the typed args of DynamicResources, with kube-scheduler v1.35's defaults.

Decoded by the config loader from ``pluginConfig`` (and defaulted for a profile that enables the plugin,
so ``config view`` shows them as kube-scheduler does); validated again by the plugin's constructor.
kubesched allocates no devices, so the values change nothing it does; they are accepted so that a
kube-scheduler configuration carries over.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubesched.durations import DurationError, parse_go_duration
from kubesched.errors import FieldError

DEFAULT_FILTER_TIMEOUT = "10s"
"""v1.35's default (feature gate DRASchedulerFilterTimeout, beta and on)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DynamicResourcesArgs:
    """``filterTimeout``: how long Filter may spend on one node (Go duration, >= 0; "0s" means no limit).
    ``bindingTimeout`` needs the DRADeviceBindingConditions and DRAResourceClaimDeviceStatus gates, which
    v1.35 leaves off, so setting it is forbidden, as kube-scheduler forbids it."""

    filter_timeout: str = DEFAULT_FILTER_TIMEOUT
    binding_timeout: str | None = None

    def validate(self, path: str) -> list[FieldError]:
        base = f"{path}." if path else ""
        errors: list[FieldError] = []
        timeout = self.filter_timeout
        try:
            negative = parse_go_duration(timeout) < 0
        except DurationError:
            errors.append(FieldError.invalid(f"{base}filterTimeout", timeout, "must be a duration, e.g. 10s"))
        else:
            if negative:
                errors.append(FieldError.invalid(f"{base}filterTimeout", timeout, "must be zero or positive"))
        if self.binding_timeout is not None:
            errors.append(
                FieldError.forbidden(
                    f"{base}bindingTimeout",
                    "DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate is disabled",
                )
            )
        return errors
