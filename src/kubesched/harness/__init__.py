"""Real servers kubesched starts to exercise itself: an OPA-compatible server, an envtest control plane, TLS.

Who calls it: ``kubesched bench`` at run time, and the tests (directly and through :mod:`kubesched.testing`).
A package of its own, not under ``bench``, because it imports nothing of kubesched: the tests use it without
the benchmark, and the product never has to import the test-support package to run a benchmark.
"""
