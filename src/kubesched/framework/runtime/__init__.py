"""framework/runtime."""
