"""scheduler/cache."""
