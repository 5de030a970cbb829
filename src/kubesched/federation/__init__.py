"""kubesched.federation: member clusters as the hub's scheduling targets.

- :mod:`.state`: a MemberCluster (and, in simulation, its own Nodes and Pods) → the
  :class:`~kubesched.framework.clusters.ClusterState` cluster plugins read; the manifest-backed
  :class:`~kubesched.framework.clusters.ClusterStateSource` the simulation provides to them.
- :mod:`.adapter`: a member → one framework Node (the "super node") and the placeholder pod that carries its
  already-allocated capacity, so the framework and the upstream plugins run unchanged on clusters.
- :mod:`.plane`: splitting loaded manifests into the node plane and the cluster plane of a simulation.
- :mod:`.profiles`: which profiles of a configuration place pods onto clusters.

Later increments add here the cluster state cache refreshed from live members, reservations and the agent.
"""
