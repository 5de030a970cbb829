"""Simulation: a whole scheduler over an in-memory cluster on virtual time (``kubesched simulate``, tests)."""

from kubesched.simulation.run import SimulationReport as SimulationReport
from kubesched.simulation.run import simulate as simulate
from kubesched.simulation.run import simulate_async as simulate_async

__all__ = ["SimulationReport", "simulate", "simulate_async"]
