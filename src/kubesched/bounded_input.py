"""Limits on what kubesched reads from files: a size cap, and YAML whose aliases expand without bound refused.

Who calls it: every reader of user files — manifests (``simulate -f``), the scheduler configuration, policy
data files, benchmark workloads — so that ``-f /dev/zero`` or a "billion laughs" alias bomb is a one-line error,
not a MemoryError traceback or a machine swapping for minutes.

- :func:`read_text`: at most ``KUBESCHED_MAX_INPUT_BYTES`` bytes (default 512 MiB, a 5000-node cluster dump is
  ~100 MB), UTF-8; raises :class:`InputTooLarge` (with the file and the limit) beyond it, ``OSError`` and
  ``UnicodeDecodeError`` as ``open`` would. A regular file is refused by its size before it is read; anything
  else (a pipe, a device) is read in chunks of :data:`CHUNK_BYTES`, and a NUL byte, which no text format
  kubesched reads allows, stops it at once as a decoding error (``-f /dev/zero`` holds one chunk, not the limit).
- :func:`check_aliases`: YAML aliases share the anchored node, so a few dozen of them can stand for billions
  of nodes once a reader walks the result (JSON encoding, copying, validation). The composed node graph is
  measured as a tree, memoized per node, without expanding it; a document whose expanded size exceeds
  ``ALIAS_EXPANSION_FACTOR`` times its composed size (and ``MIN_EXPANDED_NODES``) is refused, as go-yaml v3
  refuses "excessive aliasing". Documents without anchors are not walked at all.
"""

from __future__ import annotations

import codecs
import os
import re
import stat
from pathlib import Path
from typing import Any, TextIO

import yaml

from kubesched.errors import KubeschedError

MAX_INPUT_BYTES_ENV = "KUBESCHED_MAX_INPUT_BYTES"
DEFAULT_MAX_INPUT_BYTES = 512 * 1024 * 1024
ALIAS_EXPANSION_FACTOR = 10
MIN_EXPANDED_NODES = 100_000
CHUNK_BYTES = 1 << 20  # read at a time: what is held beyond the text read so far


class InputTooLarge(KubeschedError):
    """A file is larger than the input limit, or its YAML aliases expand beyond the alias limit."""


def max_input_bytes() -> int:
    raw = os.environ.get(MAX_INPUT_BYTES_ENV, "")
    try:
        value = int(raw) if raw else DEFAULT_MAX_INPUT_BYTES
    except ValueError:
        raise InputTooLarge(f"{MAX_INPUT_BYTES_ENV}={raw!r} is not a whole number of bytes") from None
    return value if value > 0 else DEFAULT_MAX_INPUT_BYTES


def read_text(path: str | os.PathLike[str]) -> str:
    """The UTF-8 text of ``path``, refused beyond the input limit (named in the error, with how to raise it)."""
    limit = max_input_bytes()
    with open(path, "rb") as handle:
        info = os.fstat(handle.fileno())
        if stat.S_ISREG(info.st_mode) and info.st_size > limit:
            raise _too_large(path, limit)
        decoder = codecs.getincrementaldecoder("utf-8")()
        parts: list[str] = []
        read = 0
        while chunk := handle.read(min(CHUNK_BYTES, limit + 1 - read)):
            read += len(chunk)
            if read > limit:
                raise _too_large(path, limit)
            _refuse_nul(chunk, read - len(chunk))
            parts.append(decoder.decode(chunk))
        parts.append(decoder.decode(b"", final=True))
    return "".join(parts)


def read_stdin(stream: TextIO) -> str:
    """Standard input (``-f -``), refused beyond the input limit like a file."""
    limit = max_input_bytes()
    parts: list[str] = []
    read = 0
    while chunk := stream.read(min(CHUNK_BYTES, limit + 1 - read)):
        read += len(chunk)
        if read > limit:
            raise InputTooLarge(
                f"standard input: larger than {limit} characters, the input limit "
                f"(set {MAX_INPUT_BYTES_ENV} to read more)"
            )
        _refuse_nul(chunk, read - len(chunk))
        parts.append(chunk)
    return "".join(parts)


def _too_large(path: str | os.PathLike[str], limit: int) -> InputTooLarge:
    return InputTooLarge(
        f"{Path(path)}: larger than {limit} bytes, the input limit (set {MAX_INPUT_BYTES_ENV} to read more)"
    )


def _refuse_nul(chunk: bytes | str, offset: int) -> None:
    """No text format kubesched reads (YAML, JSON, Rego) allows a NUL: binary data is refused at the first chunk,
    not read up to the limit (``-f /dev/zero``). As a decoding error, which every reader reports already."""
    at = chunk.find(b"\0") if isinstance(chunk, bytes) else chunk.find("\0")
    if at >= 0:
        raise UnicodeDecodeError("utf-8", b"\0", 0, 1, f"a NUL byte at offset {offset + at}: binary data, not text")


def check_aliases(node: yaml.Node, where: str) -> None:
    """Refuse a composed document whose aliases expand it far beyond its size (module doc)."""
    sizes: dict[int, int] = {}
    expanded = _iterative_size(node, sizes, where)
    composed = len(sizes)
    if expanded > max(ALIAS_EXPANSION_FACTOR * composed, MIN_EXPANDED_NODES):
        raise InputTooLarge(
            f"{where}: YAML aliases expand {composed} nodes to {expanded} "
            f"(more than {ALIAS_EXPANSION_FACTOR}x and {MIN_EXPANDED_NODES}): refusing an alias bomb"
        )


def _iterative_size(root: yaml.Node, sizes: dict[int, int], where: str) -> int:
    """Tree size of ``root`` with shared subtrees counted at every use; deep documents need no recursion."""
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_nodes: set[int] = set()
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if children_done or not children:
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
            open_nodes.discard(id(node))
            continue
        if any(id(child) in open_nodes or child is node for child in children):
            raise InputTooLarge(f"{where}: a YAML anchor's value contains an alias of itself")
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


# An anchor: "&name" where a node may start (line start, after whitespace or a flow indicator). An "&" inside a
# plain or quoted scalar (a URL's query string) may match too; that costs only the walk.
_ANCHOR = re.compile(r"(?:^|[\s\[{,])&[^\s\[\]{},]", re.MULTILINE)


def may_have_aliases(text: str) -> bool:
    """False when ``text`` has no anchor (so no alias can refer to one): the common case, not walked."""
    return _ANCHOR.search(text) is not None


def load_yaml(text: str, where: str, loader: type[yaml.SafeLoader] = yaml.SafeLoader) -> Any:
    """One YAML document, refused when its aliases expand without bound; YAML errors propagate."""
    instance = loader(text)
    try:
        node = instance.get_single_node()
        if node is None:
            return None
        if may_have_aliases(text):
            check_aliases(node, where)
        return instance.construct_document(node)
    finally:
        instance.dispose()
