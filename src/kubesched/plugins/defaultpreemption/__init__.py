"""DefaultPreemption: evict lower-priority pods when nothing fits a pod (PostFilter)."""

from kubesched.plugins.defaultpreemption.args import DefaultPreemptionArgs
from kubesched.plugins.defaultpreemption.default_preemption import DefaultPreemption

__all__ = ["DefaultPreemption", "DefaultPreemptionArgs"]
