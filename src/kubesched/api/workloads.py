"""Service, ReplicaSet, ReplicationController and StatefulSet, reduced to what the scheduler reads of them.

Who calls it: :mod:`kubesched.api.manifests` (loading), and through the framework's listers
(:mod:`kubesched.framework.listers`) the plugins that spread pods by the objects selecting them:
PodTopologySpread's system-default constraints and SelectorSpread, via kube-scheduler's
``helper.DefaultSelector``. That helper merges the ``spec.selector`` of every Service in the pod's namespace
that selects the pod (``GetPodServices``), then adds the selector of the pod's controller when the controller
reference names a ``v1`` ReplicationController, an ``apps/v1`` ReplicaSet or an ``apps/v1`` StatefulSet. Nothing
else of these objects is read by any in-tree plugin, so nothing else is modelled; ``raw`` keeps the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from kubesched.errors import FieldError

from . import _fields as f
from .objects import ObjectMeta
from .selectors import LabelSelector

__all__ = ["ReplicaSet", "ReplicationController", "Service", "StatefulSet"]


def _top(obj: object, where: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        f.wrong_type(where, "", "a mapping", obj)
    return obj


def _metadata(obj: Mapping[str, Any], where: str, kind: str) -> ObjectMeta:
    return ObjectMeta.from_dict(f.mapping(obj, "metadata", where, ""), where, kind=kind)


def _controller_selector(spec: Mapping[str, Any], where: str, empty_detail: str) -> LabelSelector:
    """An apps/v1 controller's selector: required and non-empty, as validation demands (apps/v1 never
    defaults it from the template, unlike the old extensions/v1beta1 API)."""
    if spec.get("selector") is None:
        f.reject(where, FieldError.required("spec.selector"))
    selector = LabelSelector.from_dict(spec["selector"], where, path="spec.selector")
    if selector.is_empty:
        f.invalid(where, "spec.selector", selector.raw, empty_detail)
    return selector


@dataclass(frozen=True, slots=True)
class Service:
    """A Service; ``selector`` is ``spec.selector``, or ``None`` when it has none.

    GetPodServices skips a Service with a nil selector ("services with nil selectors match nothing, not
    everything"). ``selector: {}`` is stored by the API server as no selector at all (empty maps are omitted
    when it encodes the object), so it reads as ``None`` here too.
    """

    metadata: ObjectMeta
    selector: Mapping[str, str] | None
    raw: Mapping[str, Any]

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str) -> Self:
        obj = _top(obj, where)
        metadata = _metadata(obj, where, "Service")
        spec = f.mapping(obj, "spec", where, "")
        selector = f.string_map(spec, "selector", where, "spec")
        return cls(metadata=metadata, selector=selector or None, raw=obj)


@dataclass(frozen=True, slots=True)
class ReplicationController:
    """A ReplicationController; ``selector`` is its (equality-only) ``spec.selector``.

    As the API server's defaulting does, an empty selector is taken from ``spec.template.metadata.labels``
    (and empty object labels likewise); a selector still empty after that is invalid.
    """

    metadata: ObjectMeta
    selector: Mapping[str, str]
    raw: Mapping[str, Any]

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str) -> Self:
        obj = _top(obj, where)
        metadata = _metadata(obj, where, "ReplicationController")
        spec = f.mapping(obj, "spec", where, "")
        selector = f.string_map(spec, "selector", where, "spec")
        template = f.mapping(spec, "template", where, "spec")
        template_labels = f.string_map(
            f.mapping(template, "metadata", where, "spec.template"), "labels", where, "spec.template.metadata"
        )
        if template_labels:
            selector = selector or dict(template_labels)
            if not metadata.labels:
                metadata.labels = dict(template_labels)
        if not selector:
            f.reject(where, FieldError.required("spec.selector"))
        return cls(metadata=metadata, selector=selector, raw=obj)


@dataclass(frozen=True, slots=True)
class _AppsController:
    """An apps/v1 controller the scheduler reads only the label selector of."""

    metadata: ObjectMeta
    selector: LabelSelector
    raw: Mapping[str, Any]

    _KIND: ClassVar[str] = ""
    _EMPTY_SELECTOR: ClassVar[str] = ""

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str) -> Self:
        obj = _top(obj, where)
        metadata = _metadata(obj, where, cls._KIND)
        spec = f.mapping(obj, "spec", where, "")
        return cls(metadata=metadata, selector=_controller_selector(spec, where, cls._EMPTY_SELECTOR), raw=obj)


@dataclass(frozen=True, slots=True)
class ReplicaSet(_AppsController):
    _KIND: ClassVar[str] = "ReplicaSet"
    # Upstream's ReplicaSet validation reuses the Deployment wording.
    _EMPTY_SELECTOR: ClassVar[str] = "empty selector is invalid for deployment"


@dataclass(frozen=True, slots=True)
class StatefulSet(_AppsController):
    _KIND: ClassVar[str] = "StatefulSet"
    _EMPTY_SELECTOR: ClassVar[str] = "empty selector is invalid for statefulset"
