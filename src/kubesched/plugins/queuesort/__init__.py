"""PrioritySort: orders the active queue by priority, then by queue time."""

from kubesched.plugins.queuesort.priority_sort import PrioritySort

__all__ = ["PrioritySort"]
