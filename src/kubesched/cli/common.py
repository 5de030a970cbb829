"""What every ``kubesched`` command that schedules needs: the plugin registry, the configuration, warnings.

Used by :mod:`kubesched.cli.main`, :mod:`kubesched.cli.explain` and :mod:`kubesched.cli.agent`.
"""

from __future__ import annotations

import argparse
import math
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


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value
