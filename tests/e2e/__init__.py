"""End-to-end tests against a real kube-apiserver and etcd.

A package (unlike the other test folders) only so that mypy tells its conftest from tests/conftest.py.
"""
