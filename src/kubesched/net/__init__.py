"""kubesched's network plumbing, shared by every client it runs: the kube API client, the hub's agent client,
the remote OPA client and the audit webhook.

One concern per module: :mod:`.http1` (a request and its answer on one connection), :mod:`.pool` (keep-alive
connections to one server), :mod:`.tls` (client and server TLS contexts), :mod:`.token_file` (a bearer token read
from a file that rotates) and :mod:`.retry` (when to try again, and how long to wait first). It imports nothing of
kubesched but :mod:`kubesched.errors` and :mod:`kubesched.clock`.
"""
