"""A pod's effective resource request, computed as k8s component-helpers ``PodRequests`` does.

Who calls it: the framework's PodInfo/NodeInfo when a pod enters the cache (``Requested`` and, with
``non_zero=True``, ``NonZeroRequested``), NodeResourcesFit's PreFilter, and the CLI's capacity reports.

The rule (KEP-753, sidecar containers): app containers add up; a restartable init container ("sidecar",
``restartPolicy: Always``) keeps running, so it adds to that sum and to every later init step; a regular init
container needs its own request plus the sidecars started before it. Per resource the pod needs the larger of
the running total and the biggest init step; a pod-level request (``spec.resources``, PodLevelResources, on by
default since v1.34: cpu, memory, huge pages) replaces that aggregate for its resource; then ``spec.overhead``
is added.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .objects import Container, Pod

__all__ = ["DEFAULT_MEMORY_REQUEST", "DEFAULT_MILLI_CPU_REQUEST", "pod_requests", "pod_requests_with_non_zero"]

DEFAULT_MILLI_CPU_REQUEST = 100
"""Milli-CPU counted for a container that names no cpu request, when scoring (``non_zero=True``)."""

DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
"""Bytes of memory counted for a container that names no memory request, when scoring."""

_NON_ZERO_DEFAULTS = {"cpu": DEFAULT_MILLI_CPU_REQUEST, "memory": DEFAULT_MEMORY_REQUEST}


def _requests_of(container: Container, non_zero: bool) -> Mapping[str, int]:
    if not non_zero:
        return container.requests
    # Only an absent request gets the default; an explicit 0 stays 0.
    missing = {k: v for k, v in _NON_ZERO_DEFAULTS.items() if k not in container.requests}
    return {**container.requests, **missing} if missing else container.requests


def _add(into: dict[str, int], amounts: Mapping[str, int]) -> None:
    for name, amount in amounts.items():
        into[name] = into.get(name, 0) + amount


def _raise_to(into: dict[str, int], amounts: Iterable[tuple[str, int]]) -> None:
    for name, amount in amounts:
        if name not in into or amount > into[name]:
            into[name] = amount


def _containers_total(pod: Pod, non_zero: bool) -> dict[str, int]:
    """The app and init containers' effective request (before pod-level values and overhead)."""
    spec = pod.spec
    total: dict[str, int] = {}
    for container in spec.containers:
        _add(total, _requests_of(container, non_zero))

    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in spec.init_containers:
        requests = _requests_of(container, non_zero)
        if container.is_sidecar:
            _add(total, requests)
            _add(sidecars, requests)
            _raise_to(init_peak, sidecars.items())
        else:
            step = dict(requests)
            _add(step, sidecars)
            _raise_to(init_peak, step.items())

    _raise_to(total, init_peak.items())
    return total


def pod_requests(pod: Pod, *, non_zero: bool = False, pod_level: bool = True) -> dict[str, int]:
    """The pod's effective request per resource, in canonical units (milli-CPU, bytes, counts).

    Resources no container or overhead names are absent from the result. With ``non_zero=True``, a container
    lacking a cpu or memory request counts as :data:`DEFAULT_MILLI_CPU_REQUEST` /
    :data:`DEFAULT_MEMORY_REQUEST` (kube-scheduler's ``NonZeroRequested``, used only for scoring); for a pod
    with pod-level requests only a resource missing at both levels gets those defaults. ``pod_level=False``
    leaves the pod-level requests out (component-helpers' ``SkipPodLevelResources``).
    """
    spec = pod.spec
    pod_level_requests = spec.pod_level_requests if pod_level else None
    if not pod_level_requests:
        total = _containers_total(pod, non_zero)
    else:
        # The pod-level value replaces the containers' aggregate for its resource.
        total = _containers_total(pod, False)
        total.update(pod_level_requests)
        if non_zero:
            defaulted = _containers_total(pod, True)
            for name in _NON_ZERO_DEFAULTS:
                if name not in total:
                    total[name] = defaulted[name]
    _add(total, spec.overhead)
    return total


def pod_requests_with_non_zero(pod: Pod) -> tuple[dict[str, int], dict[str, int]]:
    """``(pod_requests(pod), pod_requests(pod, non_zero=True))``, for PodInfo, which derives both for every pod.

    When every container, app and init, names both a cpu and a memory request and the pod has no pod-level
    requests, no default applies anywhere and the two are equal: the sum is made once (the second is a copy).
    """
    spec = pod.spec
    if not spec.pod_level_requests:
        for container in spec.containers:
            if "cpu" not in container.requests or "memory" not in container.requests:
                break
        else:
            for container in spec.init_containers:
                if "cpu" not in container.requests or "memory" not in container.requests:
                    break
            else:
                requests = pod_requests(pod)
                return requests, dict(requests)
    return pod_requests(pod), pod_requests(pod, non_zero=True)
