"""backends/simulated."""
