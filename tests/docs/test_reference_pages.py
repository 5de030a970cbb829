"""The reference pages say what the code does: generated pages cover every command and plugin arg, the hand-written
tables list exactly the metrics and audit keys the code writes, and the docs pages code cites exist, anchors and
all."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from kubesched.cli.main import build_parser
from kubesched.config.args_decode import json_name
from kubesched.plugins.registry import in_tree_registry
from kubesched.policyapi.verdicts import PolicyVerdict

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SRC = ROOT / "src" / "kubesched"


def hook(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", DOCS / "hooks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def table_keys(page: Path, heading: str) -> set[str]:
    """The backticked first cells of the first table under ``heading`` (a line starting with that heading)."""
    lines = page.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    keys: set[str] = set()
    in_table = False
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            in_table = True
            cell = re.match(r"\|\s*`([^`]+)`", line)
            if cell:
                keys.add(cell.group(1))
        elif in_table:
            break
    return keys


# ---------------------------------------------------------------------------------------------- generated pages


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], object]]:
    found: list[tuple[tuple[str, ...], object]] = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _commands(sub, (*path, name))
    return found


def test_the_cli_page_holds_every_command_and_option() -> None:
    assert hook("cli_reference").MARKER in (DOCS / "reference" / "cli.md").read_text()
    rendered = hook("cli_reference").render(build_parser())
    commands = _commands(build_parser(), ("kubesched",))
    assert len(commands) > 12
    for path, parser in commands:
        assert f"{' '.join(path)} {{#{'-'.join(path)}}}" in rendered, path
        assert isinstance(parser, argparse.ArgumentParser)
        section = rendered.split(f"{{#{'-'.join(path)}}}", 1)[1]
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue  # -h, in every usage line
            for flag in action.option_strings:
                assert f"`{flag}" in rendered, (path, flag)
            if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
                assert f"`{action.metavar or action.dest}`" in section, (path, action.dest)


def test_the_plugin_args_page_holds_every_field_of_every_args_type() -> None:
    assert hook("plugin_args").MARKER in (DOCS / "reference" / "plugin-args.md").read_text()
    rendered = hook("plugin_args").render()
    typed = {name: r.args_type for name, r in in_tree_registry().items() if r.args_type is not None}
    assert {"NodeResourcesFit", "SecurityAuditFilter", "ClusterReservation"} <= set(typed)
    for name, args_type in typed.items():
        assert f"### {name} {{#{name.lower()}-args}}" in rendered
        section = rendered.split(f"{{#{name.lower()}-args}}", 1)[1].split("\n### ", 1)[0]
        for field in dataclasses.fields(args_type):
            assert f"| `{json_name(field)}` |" in section, (name, field.name)


def test_the_plugin_args_page_shows_the_defaults() -> None:
    rendered = hook("plugin_args").render()
    section = rendered.split("{#clusterreservation-args}", 1)[1].split("\n### ", 1)[0]
    assert "| `maxCommitsInFlight` | integer | `16` |" in section
    assert '| `scoringStrategy.type` | string | `"LeastAllocated"` |' in rendered


def test_the_agent_page_is_rendered_from_the_openapi_document() -> None:
    page = (DOCS / "reference" / "agent-api.md").read_text()
    assert hook("agent_api").MARKER in page
    rendered = hook("agent_api").render(
        __import__("yaml").safe_load((DOCS / "reference" / "agent-api.yaml").read_text())
    )
    assert "### `POST /v1/reservations` {#reserve}" in rendered
    assert "| 409 |" in rendered


# ---------------------------------------------------------------------------------------------- hand-written tables


def metric_names_in_the_code() -> set[str]:
    """Module-level constants whose value is a metric name: ``NAME = "scheduler_..."`` or ``"kubesched_..."``."""
    names: set[str] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if (
                isinstance(node, ast.Assign)
                and all(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
                and re.fullmatch(r"(scheduler|kubesched)_[a-z_]+", node.value.value)
            ):
                names.add(node.value.value)
    return names


def test_the_metrics_page_lists_exactly_the_metrics_the_code_defines() -> None:
    page = DOCS / "reference" / "metrics.md"
    documented = table_keys(page, "## Scheduler") | table_keys(page, "## Policy") | table_keys(page, "## Audit trail")
    defined = metric_names_in_the_code()
    assert "scheduler_schedule_attempts_total" in defined
    assert documented == defined


@pytest.fixture(scope="module")
def audit_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, object]]]:
    """Audit logs written by ``kubesched simulate``: a signed one with policy verdicts, and a cross-cluster one."""
    workdir = tmp_path_factory.mktemp("audit")
    shutil.copytree(ROOT / "examples", workdir / "examples")

    def simulate(*arguments: str) -> None:
        command = [sys.executable, "-m", "kubesched.cli.main", "simulate", "--time", "2026-03-01T12:00:00Z"]
        done = subprocess.run([*command, *arguments], cwd=workdir, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr

    keygen = [sys.executable, "-m", "kubesched.cli.main", "audit", "keygen", "--private", "k.pem", "--public", "k.pub"]
    subprocess.run(keygen, cwd=workdir, capture_output=True, check=True)
    node_pods = ["-f", "examples/cluster.yaml", "-f", "examples/secure-workloads.yaml"]
    simulate(*node_pods, "--config", "examples/security-config.yaml", "--audit-log", "a.jsonl")
    simulate(
        *node_pods,
        "--config",
        "examples/security-config.yaml",
        "--audit-log",
        "s.jsonl",
        "--audit-signing-key",
        "k.pem",
    )
    simulate(
        "-f",
        "examples/multicluster/manifests",
        "--config",
        "examples/multicluster/config.yaml",
        "--audit-log",
        "c.jsonl",
    )

    def read(name: str) -> list[dict[str, object]]:
        return [json.loads(line) for line in (workdir / name).read_text().splitlines()]

    return {"records": read("a.jsonl") + read("c.jsonl"), "checkpoints": read("s.jsonl.checkpoints")}


def test_the_audit_page_lists_exactly_the_keys_of_a_record(audit_files: dict[str, list[dict[str, object]]]) -> None:
    written = {key for record in audit_files["records"] for key in record}
    assert "clusters" in written  # the cross-cluster log's records carry it
    assert table_keys(DOCS / "reference" / "audit-schema.md", "## Record") == written


def test_the_audit_page_lists_exactly_the_keys_of_a_verdict(audit_files: dict[str, list[dict[str, object]]]) -> None:
    verdicts = [v for record in audit_files["records"] for v in record["verdicts"]]  # type: ignore[attr-defined]
    assert verdicts
    written = {key for verdict in verdicts for key in verdict}
    fields = {field.name for field in dataclasses.fields(PolicyVerdict)}
    assert written <= fields and fields - written <= {"note"}  # a note is written only when a verdict has one
    assert table_keys(DOCS / "reference" / "audit-schema.md", "### Verdict") == fields


def test_the_audit_page_lists_exactly_the_keys_of_a_checkpoint(
    audit_files: dict[str, list[dict[str, object]]],
) -> None:
    [checkpoint] = audit_files["checkpoints"]
    assert table_keys(DOCS / "reference" / "audit-schema.md", "## Checkpoint") == set(checkpoint)


# ---------------------------------------------------------------------------------------------- what code cites


def anchors(page: Path) -> set[str]:
    """The heading ids of a page: explicit ``{#id}`` ones, and MkDocs' slugs of the others."""
    found: set[str] = set()
    for line in page.read_text().splitlines():
        heading = re.match(r"#{1,6} (.*)", line)
        if heading is None:
            continue
        explicit = re.search(r"\{#([\w-]+)\}\s*$", heading.group(1))
        if explicit:
            found.add(explicit.group(1))
        else:
            found.add(re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", heading.group(1)).strip().lower()))
    return found


def cited_pages() -> list[tuple[Path, str, str]]:
    found = []
    for path in SRC.rglob("*.py"):
        for match in re.finditer(r"docs/([\w/-]+\.md)(?:#([\w-]+))?", path.read_text()):
            found.append((path, match.group(1), match.group(2) or ""))
    return found


def test_code_cites_only_pages_and_anchors_that_exist() -> None:
    cited = cited_pages()
    assert len(cited) >= 10
    missing = []
    for path, page, anchor in cited:
        target = DOCS / page
        if not target.is_file() or (anchor and anchor not in anchors(target)):
            missing.append(f"{path.relative_to(ROOT)}: docs/{page}#{anchor}")
    assert missing == []


def test_code_cites_no_document_outside_the_repository() -> None:
    outside = re.compile(r"DESIGN rule|DESIGN\.md|(?<!docs/)reference/[\w-]+\.md|\bseed\b[^\n]*§|§\s*\d")
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in SRC.rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if outside.search(line)
    ]
    assert offenders == []
