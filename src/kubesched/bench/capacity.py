"""Can a workload's nodes hold the pods it expects bound? Checked when a workload is read, before it runs.

Called by :func:`kubesched.bench.workload.parse_workload`. ``--param initNodes=10`` on SchedulingBasic leaves its
1000 ``initPods`` on 10 nodes of 4 CPU (400 pods of 100m): the measured pods would find no room and the run would
fail its placement check after doing nothing useful, so such a size is refused up front, naming the counts and the
params they came from. The sums are a necessary condition only (every node's allocatable added up against every
request, per resource and in pods); pods expected to stay pending (``expectUnschedulable``, churned pods) are not
counted, and a workload whose pods set a priority is not checked at all (preemption makes room by evicting).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kubesched.api.objects import Node, Pod
from kubesched.api.resources import pod_requests
from kubesched.errors import KubeschedError

if TYPE_CHECKING:
    from kubesched.bench.workload import Op

_PODS = "pods"


def capacity_problem(ops: Sequence[Op], source: str) -> str | None:
    """Why the nodes the ops create cannot hold the pods they expect bound, or None."""
    nodes = [(index, op) for index, op in enumerate(ops) if op.opcode == "createNodes" and op.count]
    bound = [
        (index, op)
        for index, op in enumerate(ops)
        if op.opcode == "createPods" and op.count and not op.expect_unschedulable
    ]
    if not nodes or not bound:
        return None
    templates = [template for _, op in bound for template in (op.templates or (op.template,))]
    if any(_may_preempt(template) for template in templates):
        return None
    try:
        have: dict[str, int] = {}
        for index, op in nodes:
            allocatable = Node.from_dict(_named(op.template), f"{source}: ops[{index}] node").allocatable
            for resource, amount in allocatable.items():
                have[resource] = have.get(resource, 0) + amount * op.count
        need: dict[str, int] = {_PODS: 0}
        each: dict[str, set[int]] = {}  # the request of one pod, per resource: a single value tells "at most N"
        for index, op in bound:
            cycle = op.templates or (op.template,)
            for j, template in enumerate(cycle):
                # Pods j, j + len(cycle), ... of the op's round robin come from this template.
                made = op.count // len(cycle) + (j < op.count % len(cycle))
                if not made:
                    continue
                requests = pod_requests(Pod.from_dict(_named(template), f"{source}: ops[{index}] pod"))
                for resource, amount in requests.items():
                    need[resource] = need.get(resource, 0) + amount * made
                    each.setdefault(resource, set()).add(amount)
            need[_PODS] += op.count
    except KubeschedError:
        return None  # a template the run itself will refuse, naming the op
    each[_PODS] = {1}
    for resource in (_PODS, "cpu", "memory", *sorted(set(need) - {_PODS, "cpu", "memory"})):
        wanted, held = need.get(resource, 0), have.get(resource, 0)
        if wanted <= held or (resource not in have and resource not in (_PODS, "cpu", "memory")):
            continue  # an extended resource no node names: the plugins say so, per pod, when it runs
        pods = need[_PODS]
        at_most = ""
        if len(each.get(resource, ())) == 1:
            at_most = f": at most {held // next(iter(each[resource]))} of them fit"
        return (
            f"{_ops(bound)}: {pods} pod(s) {_counts(bound)} ask for {_amount(resource, wanted)} in all, more than the "
            f"{_amount(resource, held)} of the {sum(op.count for _, op in nodes)} node(s) of {_ops(nodes)} "
            f"{_counts(nodes)}{at_most}; the run would fail its placement check. Lower the pod counts or raise the "
            "node count (--param)"
        )
    return None


def _named(template: Mapping[str, Any]) -> dict[str, Any]:
    """The template as an object of its own (templates carry ``generateName``; names are given when run)."""
    metadata = template.get("metadata")
    return {**template, "metadata": {**(metadata if isinstance(metadata, Mapping) else {}), "name": "capacity"}}


def _may_preempt(template: Mapping[str, Any]) -> bool:
    spec = template.get("spec")
    return isinstance(spec, Mapping) and ("priority" in spec or "priorityClassName" in spec)


def _ops(ops: Sequence[tuple[int, Op]]) -> str:
    return ", ".join(f"ops[{index}]" for index, _ in ops)


def _counts(ops: Sequence[tuple[int, Op]]) -> str:
    """``($initPods = 1000, $measurePods = 20)``, or ``(20)`` for counts written out."""
    counts = (f"${op.count_param} = {op.count}" if op.count_param else str(op.count) for _, op in ops)
    return "(" + ", ".join(counts) + ")"


def _amount(resource: str, amount: int) -> str:
    """Canonical units back to what a manifest says: cpu in cores, memory in Gi, pods as a count."""
    if resource == "cpu":
        cores = amount / 1000
        return f"{cores:g} cpu"
    if resource == "memory":
        return f"{amount / 2**30:g}Gi memory"
    return f"{amount} {resource}"
