"""Read each pod's ``spec.volumes`` once: a per-plugin memo over :func:`kubesched.api.volumes.pod_volumes`.

Who calls it: VolumeRestrictions and NodeVolumeLimits, whose Filter walks the volumes of every pod already on a
node. A pod's volumes are immutable, so an entry is keyed by the pod's UID and stays valid while the pod's
``spec.volumes`` is the very tuple it was read from (a pod copied onto a node shares it); the memo is bounded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubesched.api.objects import Pod
from kubesched.api.volumes import PodVolume, pod_volumes

__all__ = ["PodVolumeReader"]

_MAX_ENTRIES = 65536


class PodVolumeReader:
    """``reader(pod)`` → the pod's volumes; raises ManifestError (from pod_volumes) for a malformed entry."""

    __slots__ = ("_memo",)

    def __init__(self) -> None:
        self._memo: dict[str, tuple[tuple[Mapping[str, Any], ...], tuple[PodVolume, ...]]] = {}

    def __call__(self, pod: Pod) -> tuple[PodVolume, ...]:
        raw = pod.spec.volumes
        if not raw:
            return ()
        uid = pod.metadata.uid
        found = self._memo.get(uid)
        if found is not None and found[0] is raw:
            return found[1]
        volumes = pod_volumes(pod)
        if len(self._memo) >= _MAX_ENTRIES:
            # Pods come and go; dropping everything is simpler than LRU and costs one re-read per live pod.
            self._memo.clear()
        self._memo[uid] = (raw, volumes)
        return volumes
