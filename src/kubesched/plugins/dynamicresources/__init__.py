"""DynamicResources: kube-scheduler's DRA plugin, for pods without ResourceClaims; others are reported."""

from kubesched.plugins.dynamicresources.args import DynamicResourcesArgs
from kubesched.plugins.dynamicresources.dynamic_resources import DynamicResources

__all__ = ["DynamicResources", "DynamicResourcesArgs"]
