"""Code shared by several in-tree plugins (kube-scheduler's ``plugins/helper`` and bits of component-helpers).

- :mod:`.gomath`: Go's truncating integer division and ``math.Round``, for scalars and numpy arrays.
- :mod:`.normalize_score`: ``DefaultNormalizeScore`` over a score array.
- :mod:`.taints`: the taint filters and toleration matching TaintToleration and NodeUnschedulable share.
- :mod:`.resources`: which resource names are "scalar" (extended, hugepages, ...), as apimachinery decides.
- :mod:`.validation`: apimachinery's name/label validators with their exact messages.
- :mod:`.hints`: turning queueing-hint arguments into typed objects.
- :mod:`.node_selector`: compiled node selectors and preferred terms (component-helpers ``nodeaffinity``).
- :mod:`.classes`: evaluating a per-node rule once per equivalence class of a NodeBatch.
"""
