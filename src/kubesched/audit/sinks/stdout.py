"""An audit sink that prints each record as one JSON line on standard output (no hash chain).

For a scheduler running under a log collector that already ships its stdout, and for piping records into
``jq``. The stream is looked up at every write, so a redirected ``sys.stdout`` (tests,
``contextlib.redirect_stdout``) is honoured.
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

from kubesched.audit.records import AuditRecord


class StdoutSink:
    name = "stdout"

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stdout

    def write(self, record: AuditRecord) -> None:
        self.stream.write(json.dumps(record.to_json(), separators=(",", ":"), ensure_ascii=False) + "\n")

    def flush(self) -> None:
        self.stream.flush()

    async def close(self) -> None:
        self.flush()
