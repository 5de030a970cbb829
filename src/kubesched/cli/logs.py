"""Log output of the ``kubesched`` command: text for people, or one JSON object per line for log pipelines.

``kubesched --logging-format json run ...`` (kube-scheduler's flag, given before the subcommand) writes each
record as ``{"ts": ..., "level": ..., "logger": ..., "msg": ..., "pod": ..., "node": ..., "profile": ...}``: the
message plus the structured fields the scheduler passes as ``extra`` (pod, node, profile, err, counts), so a pod's
decisions can be found by field rather than by parsing text. Called once, from :func:`kubesched.cli.main.main`.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

# Attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 6),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value if isinstance(value, str | int | float | bool) or value is None else str(value)
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure(level: int, log_format: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)
