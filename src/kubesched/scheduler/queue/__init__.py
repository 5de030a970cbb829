"""scheduler/queue."""
