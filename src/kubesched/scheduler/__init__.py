"""scheduler."""
