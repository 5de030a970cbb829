"""Test-support helpers (builders, fakes, a fault proxy, clusters for the end-to-end tests), for tests only.

They may import the product; nothing in the product imports them (``tests/unit/test_layers.py``).
"""
