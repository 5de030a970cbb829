"""kubesched.agent: the cluster agent, a process beside one member cluster that the hub talks to (pull mode).

- :mod:`.core`: what it does in the member (state, reservations stored as ConfigMaps, bind, expiry);
- :mod:`.server`: its HTTPS endpoints with bearer-token authentication (``kubesched agent``);
- :mod:`.push`: push mode, the same logic run in the hub on the member's kubeconfig, behind the agent client's
  interface.

It is a layer of its own: it uses the member's API client (:mod:`kubesched.backends.kube`) and the federation
wire format, and nothing of the scheduler.
"""
