"""What every ``kubesched`` command that schedules needs: the plugin registry, the configuration, warnings.

Used by :mod:`kubesched.cli.main` and :mod:`kubesched.cli.explain`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kubesched.terminal_text import safe

if TYPE_CHECKING:
    from kubesched.config.types import SchedulerConfiguration
    from kubesched.framework.runtime.registry import Registry


CONFIG_HELP = (
    "KubeSchedulerConfiguration file (default: kube-scheduler's defaults); relative file paths in its plugin args "
    "(policies, data, tokenFile, caFile, complianceDataPath) are relative to the file's directory"
)


def plugin_registry() -> Registry:
    from kubesched.framework.runtime.registry import with_entry_points
    from kubesched.plugins.registry import in_tree_registry

    return with_entry_points(in_tree_registry())


def load_config(path: str | None, registry: Registry) -> SchedulerConfiguration:
    from kubesched.config.loader import default_config, load_config_file

    if path is None:
        return default_config(registry)
    return load_config_file(path, registry)


def warn(messages: Sequence[str]) -> None:
    for message in messages:
        print(f"warning: {safe(message)}", file=sys.stderr)
