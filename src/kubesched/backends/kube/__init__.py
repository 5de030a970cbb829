"""The live backend: kubesched against a real kube-apiserver (``kubesched run``).

Only this package talks to the Kubernetes API (docs/explanation/design.md#own-the-client-and-its-errors):
:mod:`.kubeconfig` finds the server and the credentials, :mod:`.client` is the HTTP client (rate limit, retries, our
error tree), :mod:`.reflector` keeps one resource's cache with list and watch, :mod:`.informers` runs the reflectors
the scheduler needs, :mod:`.writers` makes the writes kube-scheduler makes (status, events), :mod:`.backend` is the
:class:`~kubesched.backends.base.Backend` over all of them, and :mod:`.leader_election` holds the Lease.
"""
