"""verify_chain catches every single-record tampering and names the line: edits, deletions, swaps, copies."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from audittest_helpers import write_log
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.audit.chain import GENESIS, AuditLogError, head_path
from kubesched.audit.verify import ALTERED, BAD_HEAD, GARBLED, REMOVED, REORDERED, TRUNCATED, verify_chain

RECORDS = 6

Lines = list[bytes]


def edit_field(line: bytes, path: tuple[str, ...], value: Any) -> bytes:
    obj = json.loads(line)
    node = obj
    for key in path[:-1]:
        node = node[key]
    assert node[path[-1]] != value, "the edit must change something"
    node[path[-1]] = value
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def tamper(lines: Lines, mutation: str, k: int) -> Lines:
    """Apply ``mutation`` to line k (1-based)."""
    out = list(lines)
    i = k - 1
    if mutation == "edit-result":
        out[i] = edit_field(out[i], ("result",), "Unschedulable")
    elif mutation == "edit-nested-pod-name":
        out[i] = edit_field(out[i], ("pod", "name"), "intruder")
    elif mutation == "edit-drop-verdicts":
        out[i] = edit_field(out[i], ("verdicts",), [])
    elif mutation == "edit-hash":
        out[i] = edit_field(out[i], ("hash",), "f" * 64)
    elif mutation == "edit-prev-hash":
        out[i] = edit_field(out[i], ("prev_hash",), "e" * 64)
    elif mutation == "delete":
        del out[i]
    elif mutation == "swap-with-next":
        out[i], out[i + 1] = out[i + 1], out[i]
    elif mutation == "duplicate":
        out.insert(i + 1, out[i])
    elif mutation == "garble":
        out[i] = b'{"schema": "kubesched.io/audit/v1", "trunc\n'
    elif mutation == "blank-line-before":
        out.insert(i, b"\n")
    else:
        raise AssertionError(mutation)
    return out


# (mutation, which lines it applies to, expected line for record k, expected problem)
EXPECTED: dict[str, tuple[Callable[[int], int], str]] = {
    "edit-result": (lambda k: k, ALTERED),
    "edit-nested-pod-name": (lambda k: k, ALTERED),
    "edit-drop-verdicts": (lambda k: k, ALTERED),
    "edit-hash": (lambda k: k, ALTERED),
    "edit-prev-hash": (lambda k: k, ALTERED),
    "delete": (lambda k: k, REMOVED),
    "swap-with-next": (lambda k: k, REORDERED),
    "duplicate": (lambda k: k + 1, REORDERED),
    "garble": (lambda k: k, GARBLED),
    "blank-line-before": (lambda k: k, GARBLED),
}


def cases() -> list[Any]:
    params = []
    for mutation in EXPECTED:
        last = RECORDS - 1 if mutation == "swap-with-next" else RECORDS
        for k in range(1, last + 1):
            params.append(pytest.param(mutation, k, id=f"{mutation}-record-{k}"))
    return params


def written(directory: Path, count: int = RECORDS) -> tuple[Path, Lines]:
    path = directory / "audit.jsonl"
    write_log(path, count)
    return path, path.read_bytes().splitlines(keepends=True)


@pytest.mark.parametrize(("mutation", "k"), cases())
def test_every_single_record_tampering_is_caught_at_its_line(tmp_path: Path, mutation: str, k: int) -> None:
    path, lines = written(tmp_path)
    assert verify_chain(path).ok
    path.write_bytes(b"".join(tamper(lines, mutation, k)))
    result = verify_chain(path)
    expected_line, problem = EXPECTED[mutation]
    assert not result.ok
    assert (result.line, result.problem) == (expected_line(k), problem), result.describe()
    assert result.describe().startswith(f"{path}: line {expected_line(k)}: {problem}: ")


@settings(max_examples=150, deadline=None)
@given(
    count=st.integers(min_value=1, max_value=25),
    data=st.data(),
)
def test_property_any_edit_delete_or_swap_names_the_right_line(count: int, data: st.DataObject) -> None:
    mutation = data.draw(st.sampled_from(sorted(EXPECTED)))
    last = count - 1 if mutation == "swap-with-next" else count
    if last < 1:
        return
    k = data.draw(st.integers(min_value=1, max_value=last))
    with tempfile.TemporaryDirectory() as directory:
        path, lines = written(Path(directory), count)
        path.write_bytes(b"".join(tamper(lines, mutation, k)))
        result = verify_chain(path)
    expected_line, problem = EXPECTED[mutation]
    assert (result.ok, result.line, result.problem) == (False, expected_line(k), problem)


@settings(max_examples=60, deadline=None)
@given(count=st.integers(min_value=1, max_value=25), data=st.data())
def test_property_editing_any_leaf_value_is_caught(count: int, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path, lines = written(Path(directory), count)
        k = data.draw(st.integers(min_value=1, max_value=count))
        obj = json.loads(lines[k - 1])
        leaves = list(_leaves(obj))
        where = data.draw(st.sampled_from(leaves))
        new = data.draw(st.one_of(st.text(max_size=5), st.integers(), st.booleans(), st.none()))
        if _get(obj, where) == new and type(_get(obj, where)) is type(new):
            return
        _set(obj, where, new)
        lines[k - 1] = json.dumps(obj).encode() + b"\n"
        path.write_bytes(b"".join(lines))
        result = verify_chain(path)
    assert (result.ok, result.line, result.problem) == (False, k, ALTERED)


def _leaves(node: Any, prefix: tuple[Any, ...] = ()) -> Any:
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from _leaves(value, (*prefix, key))
    elif isinstance(node, list) and node:
        for index, value in enumerate(node):
            yield from _leaves(value, (*prefix, index))
    else:
        yield prefix


def _get(node: Any, where: tuple[Any, ...]) -> Any:
    for key in where:
        node = node[key]
    return node


def _set(node: Any, where: tuple[Any, ...], value: Any) -> None:
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value


@pytest.mark.parametrize(
    ("cut", "removed_head", "ok", "line", "problem"),
    [
        pytest.param(1, False, False, RECORDS, REMOVED, id="last-record-deleted-caught-by-the-head-file"),
        pytest.param(3, False, False, RECORDS - 2, REMOVED, id="last-three-deleted-names-the-first-missing"),
        pytest.param(1, True, True, None, "", id="without-head-file-end-deletion-is-invisible"),
    ],
)
def test_records_removed_from_the_end(
    tmp_path: Path, cut: int, removed_head: bool, ok: bool, line: int | None, problem: str
) -> None:
    path, lines = written(tmp_path)
    path.write_bytes(b"".join(lines[:-cut]))
    if removed_head:
        head_path(path).unlink()
    result = verify_chain(path)
    assert (result.ok, result.line, result.problem, result.head_file) == (ok, line, problem, not removed_head)
    if ok:
        assert result.records == RECORDS - cut


def test_torn_last_line_is_truncated(tmp_path: Path) -> None:
    path, lines = written(tmp_path)
    path.write_bytes(b"".join(lines)[:-20])
    result = verify_chain(path)
    assert (result.ok, result.line, result.problem, result.records) == (False, RECORDS, TRUNCATED, RECORDS - 1)


@pytest.mark.parametrize(
    ("head_text", "ok", "problem"),
    [
        pytest.param('{"records": 6, "hash": "zz"}', False, BAD_HEAD, id="garbled-head-file-fails"),
        pytest.param("not json", False, BAD_HEAD, id="non-json-head-file-fails"),
        pytest.param(f'{{"records": 6, "hash": "{"a" * 64}"}}', False, ALTERED, id="head-naming-another-record"),
        pytest.param(f'{{"records": 0, "hash": "{GENESIS}"}}', True, "", id="head-lagging-behind-is-fine"),
    ],
)
def test_head_file_checks(tmp_path: Path, head_text: str, ok: bool, problem: str) -> None:
    path, _ = written(tmp_path)
    head_path(path).write_text(head_text)
    result = verify_chain(path)
    assert (result.ok, result.problem) == (ok, problem), result.describe()


def test_intact_log_reports_count_and_head(tmp_path: Path) -> None:
    path, lines = written(tmp_path)
    result = verify_chain(path)
    assert result.ok and result.head_file
    assert result.records == RECORDS
    assert result.head == json.loads(lines[-1])["hash"]
    assert result.describe() == f"{path}: {RECORDS} records, chain intact"


def test_empty_log_is_intact(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    result = verify_chain(path)
    assert (result.ok, result.records, result.head) == (True, 0, GENESIS)


def test_an_enormous_line_is_reported_without_reading_it_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tracemalloc

    from kubesched.audit.lines import MAX_LINE_BYTES_ENV
    from kubesched.audit.query import read_records

    path, lines = written(tmp_path)
    enormous = b'{"schema": "' + b"x" * (24 << 20) + b'"}\n'
    path.write_bytes(b"".join([*lines[:3], enormous, *lines[3:]]))
    monkeypatch.setenv(MAX_LINE_BYTES_ENV, str(1 << 20))
    tracemalloc.start()
    try:
        result = verify_chain(path)
        with pytest.raises(AuditLogError, match=r"line 4 is not an audit record \(the line is longer than 1048576"):
            list(read_records(path))
        skipped: list[int] = []
        later = [number for number, _ in read_records(path, skip=lambda number, _why: skipped.append(number))]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (result.ok, result.line, result.problem, result.records) == (False, 4, GARBLED, 3)
    assert f"longer than {1 << 20} bytes (raise {MAX_LINE_BYTES_ENV}" in result.describe()
    assert skipped == [4] and later == [1, 2, 3, 5, 6, 7], "the lines after it are still read"
    assert peak < 8 << 20, f"peak {peak} bytes: the 24 MiB line was read whole"
