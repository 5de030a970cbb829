"""File paths in plugin args are relative to the configuration file that names them, as kubeconfig paths are.

Called by :func:`kubesched.config.loader.load_config_dict` when it knows the file's directory. A plugin's args
field that holds a path, or a list of paths, says so with ``field(metadata={"path": True})`` (SecurityAudit's
``policies``, ``data``, ``tokenFile`` and ``caFile``, ComplianceScore's ``complianceDataPath``); a relative value
is joined to the directory, an absolute one is kept. ``clientConnection.kubeconfig`` stays relative to the working
directory, as in kube-scheduler.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from .types import ProfileConfig, SchedulerConfiguration

PATH_METADATA = "path"


def resolve_plugin_paths(config: SchedulerConfiguration, base_dir: str) -> SchedulerConfiguration:
    """``config`` with every relative path in its plugin args joined to ``base_dir``."""
    if not base_dir:
        return config
    profiles = tuple(_profile(profile, base_dir) for profile in config.profiles)
    return dataclasses.replace(config, profiles=profiles)


def _profile(profile: ProfileConfig, base_dir: str) -> ProfileConfig:
    args: Mapping[str, object] = {name: resolve_paths(value, base_dir) for name, value in profile.plugin_args.items()}
    return dataclasses.replace(profile, plugin_args=args)


def resolve_paths(args: Any, base_dir: str) -> Any:
    """A plugin's args dataclass with its path fields resolved (anything else is returned as it is)."""
    if not dataclasses.is_dataclass(args) or isinstance(args, type):
        return args
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(args):
        value = getattr(args, f.name)
        resolved = _joined(value, base_dir) if f.metadata.get(PATH_METADATA) else resolve_paths(value, base_dir)
        if resolved is not value:
            changes[f.name] = resolved
    return dataclasses.replace(args, **changes) if changes else args


def _joined(value: Any, base_dir: str) -> Any:
    if isinstance(value, str):
        return os.path.join(base_dir, value) if value and not os.path.isabs(value) else value
    if isinstance(value, tuple | list):
        return type(value)(_joined(item, base_dir) for item in value)
    return value
