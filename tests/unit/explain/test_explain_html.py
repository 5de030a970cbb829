"""``simulate --output html``: the page's structure, read back with html.parser; escaping; no network."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from kubesched.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
CASES = ROOT / "tests" / "integration" / "testdata" / "explain-cases.yaml"


class Page(HTMLParser):
    """Tables by id (header cells, rows of cell texts), every start tag, the text of style/script."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.tables: dict[str, tuple[list[str], list[list[str]]]] = {}
        self.texts: list[str] = []
        self._table: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._in_head = False
        self.inline: dict[str, str] = {"style": "", "script": ""}
        self._inline: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag == "table":
            self._table = attributes.get("id") or ""
            self.tables[self._table] = ([], [])
        elif tag == "thead":
            self._in_head = True
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []
        elif tag in self.inline:
            self._inline = tag

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table is not None:
            header, rows = self.tables[self._table]
            if self._in_head:
                header.extend(self._row)
            else:
                rows.append(self._row)
            self._row = None
        elif tag == "thead":
            self._in_head = False
        elif tag == "table":
            self._table = None
        elif tag == self._inline:
            self._inline = None

    def handle_data(self, data: str) -> None:
        self.texts.append(data)
        if self._cell is not None:
            self._cell.append(data)
        if self._inline is not None:
            self.inline[self._inline] += data


def page(capsys: pytest.CaptureFixture[str], manifests: Path, *options: str) -> tuple[str, Page]:
    assert main(["simulate", "-f", str(manifests), *options, "--output", "html"]) == 0
    out = capsys.readouterr().out
    parsed = Page()
    parsed.feed(out)
    parsed.close()
    return out, parsed


def test_one_table_of_pods_and_a_node_by_plugin_table_per_pod(capsys: pytest.CaptureFixture[str]) -> None:
    text, parsed = page(capsys, EXAMPLES / "cluster.yaml", "--config", str(EXAMPLES / "config.yaml"))
    assert text.startswith("<!DOCTYPE html>")
    header, rows = parsed.tables["pods"]
    assert header == ["Pod", "Profile", "Result", "Node", "Attempts", "Why not elsewhere"]
    by_pod = {row[0]: row for row in rows}
    assert len(rows) == 8
    assert by_pod["ml/trainer"][2:4] == ["Scheduled", "node-b"]
    assert "node-a: NodeResourcesFit: Insufficient cpu" in by_pod["ml/trainer"][5]
    node_tables = sorted(name for name in parsed.tables if name.startswith("nodes-"))
    # Every attempted pod has its table (the gated one never reached Filter, so it has none).
    assert len(node_tables) == 7
    header, rows = parsed.tables["nodes-1"]  # default/web-1
    assert header[:3] == ["Node", "Outcome", "NodeUnschedulable"]
    assert "TaintToleration (\u00d73)" in header and header[-2:] == ["Total", "Reason"]
    assert [row[0] for row in rows] == ["node-a", "node-b", "node-c", "node-d", "node-e"]
    node_d = dict(zip(header, rows[3], strict=True))
    assert (node_d["NodeUnschedulable"], node_d["NodeName"], node_d["Total"]) == ("rejected", "-", "-")
    node_a = dict(zip(header, rows[0], strict=True))
    assert node_a["Outcome"] == "chosen" and node_a["TaintToleration (\u00d73)"] == "300"


def test_self_contained_no_network(capsys: pytest.CaptureFixture[str]) -> None:
    _, parsed = page(capsys, EXAMPLES / "cluster.yaml")
    assert parsed.inline["style"] and parsed.inline["script"]
    assert not [tag for tag, _ in parsed.tags if tag in ("link", "img", "iframe", "object", "embed")]
    for tag, attributes in parsed.tags:
        assert "src" not in attributes, tag
        href = attributes.get("href")
        assert href is None or href.startswith("#"), href
    assert "http" not in parsed.inline["script"] and "url(" not in parsed.inline["style"]


def test_user_strings_are_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    text, parsed = page(capsys, CASES)
    # The pod is named huge-<b>&amp; in the manifest: it must come back as that text, never as markup.
    assert "default/huge-<b>&amp;" in [row[0] for row in parsed.tables["pods"][1]]
    assert "b" not in {tag for tag, _ in parsed.tags}
    assert "huge-&lt;b&gt;&amp;amp;" in text


def test_a_preemptors_earlier_attempt_shows_candidates_and_victims(capsys: pytest.CaptureFixture[str]) -> None:
    _, parsed = page(capsys, CASES)
    text = "".join(parsed.texts)
    assert "Attempt 1, PostFilter DefaultPreemption: candidates" in text
    assert re.search(r"n1( \(chosen\))?: victims batch/low-1; PDB violations 0", text)
    assert re.search(r"n2( \(chosen\))?: victims batch/low-2; PDB violations 0", text)
    assert text.count("(chosen): victims") == 1 and "Preempted for it: batch/low-" in text
    urgent = next(row for row in parsed.tables["pods"][1] if row[0] == "default/urgent")
    assert urgent[2] == "Scheduled"
