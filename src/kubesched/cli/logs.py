"""Log output of the ``kubesched`` command: text for people, or one JSON object per line for log pipelines.

Text is klog's layout, so the lines read like kube-scheduler's: ``I1206 10:11:12.345678 kubesched.scheduler]
"Unable to schedule pod; no fit; waiting" pod="default/web" err="0/3 nodes are available: ..."`` (severity I, W
or E, local date and time to the microsecond, the logger, then the message, quoted when key="value" fields
follow, as klog's structured lines are).
``kubesched --logging-format json run ...`` (kube-scheduler's flag, given before the subcommand) writes each
record as ``{"ts": ..., "level": ..., "logger": ..., "msg": ..., "pod": ..., "node": ..., "profile": ...}``: the
message plus the structured fields the scheduler passes as ``extra`` (pod, node, profile, err, counts), so a pod's
decisions can be found by field rather than by parsing text. Called once, from :func:`kubesched.cli.main.main`.
"""

from __future__ import annotations

import json
import logging
import sys
import time
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
        for key, value in _fields(record).items():
            entry[key] = value if isinstance(value, str | int | float | bool) or value is None else str(value)
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    return {key: value for key, value in vars(record).items() if key not in _STANDARD and not key.startswith("_")}


class TextFormatter(logging.Formatter):
    """klog's text layout (module doc); values as Go's %q would quote them, numbers and booleans bare."""

    def format(self, record: logging.LogRecord) -> str:
        severity = "E" if record.levelno >= logging.ERROR else "W" if record.levelno >= logging.WARNING else "I"
        moment = time.localtime(record.created)
        micros = int((record.created % 1) * 1_000_000)
        header = f"{severity}{time.strftime('%m%d %H:%M:%S', moment)}.{micros:06d} {record.name}] "
        message = record.getMessage()
        fields = _fields(record)
        if fields:
            pairs = " ".join(f"{key}={_value(value)}" for key, value in fields.items())
            line = f"{header}{json.dumps(message, ensure_ascii=False)} {pairs}"
        else:
            line = header + message
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value if isinstance(value, str) else str(value), ensure_ascii=False)


def configure(level: int, log_format: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    logging.basicConfig(level=level, handlers=[handler], force=True)
