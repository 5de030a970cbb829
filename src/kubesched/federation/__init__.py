"""kubesched.federation: member clusters as the hub's scheduling targets.

- :mod:`.state`: a MemberCluster (and, in simulation, its own Nodes and Pods) → the
  :class:`~kubesched.clusterapi.contract.ClusterState` cluster plugins read; the manifest-backed
  :class:`~kubesched.clusterapi.contract.ClusterStateSource` the simulation provides to them.
- :mod:`.adapter`: a member → one framework Node (the "super node") and the placeholder pod that carries its
  already-allocated capacity, so the framework and the upstream plugins run unchanged on clusters.
- :mod:`.plane`: splitting loaded manifests into the node plane and the cluster plane of a simulation.
- :mod:`.profiles`: which profiles of a configuration place pods onto clusters.

- :mod:`.wire`: the cluster agent's wire format (paths, labels, ClusterState and reservation requests as JSON).
- :mod:`.agent_client`: the hub's client of one agent (state, reserve, release, bind), with its own errors.
- :mod:`.cache`: :class:`~kubesched.federation.cache.ClusterStateCache`, the live ClusterStateSource refreshed
  from every member's agent in the background.
- :mod:`.commit`: :class:`~kubesched.federation.commit.AgentCommitter`, the ClusterCommitter (reserve, release,
  bind) of the two-phase commit over the members' endpoints.

The agent itself (the process beside each member) is :mod:`kubesched.agent`.
"""
