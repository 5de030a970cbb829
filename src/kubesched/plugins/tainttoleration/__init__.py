"""TaintToleration: filters out nodes with untolerated NoSchedule/NoExecute taints, prefers nodes with
fewer untolerated PreferNoSchedule taints."""

from kubesched.plugins.tainttoleration.taint_toleration import TaintToleration

__all__ = ["TaintToleration"]
