"""DefaultBinder: binds the pod to its node through the cluster API."""

from kubesched.plugins.defaultbinder.default_binder import DefaultBinder

__all__ = ["DefaultBinder"]
