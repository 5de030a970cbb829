"""SchedulingGates: keeps pods with ``spec.schedulingGates`` out of the active queue."""

from kubesched.plugins.schedulinggates.scheduling_gates import SchedulingGates

__all__ = ["SchedulingGates"]
