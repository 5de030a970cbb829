"""Inputs are bounded: a file beyond the size limit and YAML whose aliases expand without bound are one-line
errors naming the file, in every reader (manifests, configuration, policy data, workloads)."""

from __future__ import annotations

import contextlib
import io
import os
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from kubesched.api.manifests import load_manifests
from kubesched.bench.workload import WorkloadError, load_workload
from kubesched.bounded_input import (
    MAX_INPUT_BYTES_ENV,
    InputTooLarge,
    check_aliases,
    load_yaml,
    read_stdin,
    read_text,
)
from kubesched.cli.main import main
from kubesched.errors import ManifestError


def bomb(levels: int, prefix: str = "") -> str:
    lines = [prefix, 'b0: &b0 ["x","x","x","x","x","x","x","x","x"]']
    for i in range(1, levels + 1):
        lines.append(f"b{i}: &b{i} [" + ",".join([f"*b{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_without_being_expanded() -> None:
    with pytest.raises(InputTooLarge, match=r"^doc: YAML aliases expand \d+ nodes to \d+ .*alias bomb"):
        load_yaml(bomb(9), "doc")  # 9**10 nodes: expanding it would never finish


def test_ordinary_aliases_and_recursive_ones() -> None:
    assert load_yaml("a: &a {x: 1}\nb: *a\nc: *a\n", "doc") == {"a": {"x": 1}, "b": {"x": 1}, "c": {"x": 1}}
    assert load_yaml("url: http://x/?a=1&b=2\n", "doc") == {"url": "http://x/?a=1&b=2"}
    with pytest.raises(InputTooLarge, match="contains an alias of itself"):
        node = yaml.compose("a: &a [1, *a]\n")
        assert node is not None
        check_aliases(node, "doc")


def test_a_file_beyond_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("x" * 100)
    monkeypatch.setenv(MAX_INPUT_BYTES_ENV, "99")
    with pytest.raises(InputTooLarge, match=rf"big.yaml: larger than 99 bytes.*{MAX_INPUT_BYTES_ENV}"):
        read_text(path)
    monkeypatch.setenv(MAX_INPUT_BYTES_ENV, "100")
    assert read_text(path) == "x" * 100


def test_every_reader_refuses_a_bomb(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "cluster.yaml"
    manifest.write_text(bomb(7, "apiVersion: v1\nkind: Pod"))
    with pytest.raises(ManifestError, match=r"cluster.yaml: document 1 \(line 1\): YAML aliases expand"):
        load_manifests([str(manifest)])
    config = tmp_path / "config.yaml"
    config.write_text(bomb(7, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration"))
    assert main(["config", "validate", str(config)]) == 1
    err = capsys.readouterr().err
    assert "config.yaml" in err and "alias bomb" in err and "Traceback" not in err
    workload = tmp_path / "w.yaml"
    workload.write_text(bomb(7, "name: W"))
    with pytest.raises(WorkloadError, match=r"w\.yaml: YAML aliases expand"):
        load_workload(workload)


def test_simulate_of_dev_zero_is_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MAX_INPUT_BYTES_ENV, str(1 << 20))
    assert main(["simulate", "-f", "/dev/zero"]) == 1
    err = capsys.readouterr().err
    [line] = err.strip().splitlines()
    assert line.startswith("error: /dev/zero: could not read file: ") and "a NUL byte at offset 0: binary data" in line


def peak_bytes_while(read: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        with contextlib.suppress(InputTooLarge, UnicodeDecodeError):
            read()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_dev_zero_is_refused_without_holding_the_limit_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    limit = 64 << 20
    monkeypatch.setenv(MAX_INPUT_BYTES_ENV, str(limit))
    with pytest.raises(UnicodeDecodeError, match="a NUL byte at offset 0: binary data, not text"):
        read_text("/dev/zero")
    assert peak_bytes_while(lambda: read_text("/dev/zero")) < limit // 16


def test_a_regular_file_beyond_the_limit_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "big.yaml"
    with open(path, "wb") as handle:
        handle.truncate(64 << 20)  # sparse: no disk, and every byte a NUL, which the size refuses first
    monkeypatch.setenv(MAX_INPUT_BYTES_ENV, str(32 << 20))
    with pytest.raises(InputTooLarge, match="larger than 33554432 bytes"):
        read_text(path)
    assert peak_bytes_while(lambda: read_text(path)) < 1 << 20


def test_an_endless_text_stream_stops_at_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipe has no size to check first: it is read in chunks up to the limit, then refused."""
    fifo = tmp_path / "stream"
    os.mkfifo(fifo)
    monkeypatch.setenv(MAX_INPUT_BYTES_ENV, str(4 << 20))
    stop = threading.Event()

    def feed() -> None:
        with contextlib.suppress(BrokenPipeError), open(fifo, "wb") as out:
            while not stop.is_set():
                out.write(b"x: y\n" * 4096)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        with pytest.raises(InputTooLarge, match=r"stream: larger than 4194304 bytes"):
            read_text(fifo)
    finally:
        stop.set()
        writer.join()


def test_standard_input_of_nul_bytes_is_refused_at_the_first_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MAX_INPUT_BYTES_ENV, str(64 << 20))
    with pytest.raises(UnicodeDecodeError, match="a NUL byte at offset 3"):
        read_stdin(io.StringIO("abc\0" + "x" * (1 << 20)))
    with pytest.raises(InputTooLarge, match="standard input: larger than 10 characters"):
        monkeypatch.setenv(MAX_INPUT_BYTES_ENV, "10")
        read_stdin(io.StringIO("x" * 11))
