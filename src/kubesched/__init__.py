"""kubesched: the Kubernetes Scheduling Framework in Python.

The public plugin API lives in :mod:`kubesched.framework`; the scheduler, its queue and cache in
:mod:`kubesched.scheduler`; the in-tree plugins in :mod:`kubesched.plugins`.
"""

__version__ = "0.1.0"
