"""MkDocs hook: the CLI reference, generated from ``kubesched``'s argument parser when the site is built.

A page that holds the line ``<!-- generated: cli -->`` gets, in its place, one section per command and
subcommand (usage, description, every argument with its default), so the reference cannot drift from the
parser. ``tests/docs/test_reference_pages.py`` checks that every command and option appears.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

MARKER = "<!-- generated: cli -->"


def anchor(path: tuple[str, ...]) -> str:
    """The heading id of a command: ``kubesched audit verify`` -> ``kubesched-audit-verify``."""
    return "-".join(path)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    """The subcommands of ``parser`` in the order they were added, each with its one-line help."""
    found: dict[str, tuple[argparse.ArgumentParser, str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                found[name] = (sub, helps.get(name, ""))
    return found


def walk(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ("kubesched",), summary: str = ""
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, str]]:
    """Every command under ``parser`` (itself first), depth first, with its path and one-line help."""
    yield path, parser, summary
    for name, (sub, help_text) in _subcommands(parser).items():
        yield from walk(sub, (*path, name), help_text)


def _flags(action: argparse.Action) -> str:
    if not action.option_strings:
        shown = action.metavar or action.dest
        return f"`{shown}`"
    value = ""
    if action.nargs != 0:
        if action.choices is not None:
            value = " {" + ",".join(str(choice) for choice in action.choices) + "}"
        else:
            value = " " + str(action.metavar or action.dest.upper())
    return ", ".join(f"`{flag}{value}`" for flag in action.option_strings)


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, [], argparse.SUPPRESS):
        return ""
    return f"`{action.default}`"


def _global_options(root: argparse.ArgumentParser) -> set[tuple[str, str]]:
    """The top-level options every subcommand also accepts, by (dest, help): listed once, on ``kubesched``.
    A subcommand's own option of the same name (``policy test -v``) has its own help and is kept."""
    return {(action.dest, str(action.help)) for action in root._actions if action.option_strings}


def _arguments_table(parser: argparse.ArgumentParser, skip: set[tuple[str, str]]) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
            continue
        if (action.dest, str(action.help)) in skip:
            continue
        if action.help == argparse.SUPPRESS:
            continue
        help_text = (action.help or "") % {"default": action.default, "prog": parser.prog}
        rows.append(f"| {_flags(action)} | {_default(action)} | {_cell(help_text)} |")
    if not rows:
        return []
    return ["| argument | default | description |", "|---|---|---|", *rows, ""]


def render(root: argparse.ArgumentParser) -> str:
    """The Markdown of every command of ``root``."""
    globals_ = _global_options(root)
    lines: list[str] = []
    for path, parser, summary in walk(root):
        level = "#" * min(len(path) + 1, 4)
        lines += [f"{level} {' '.join(path)} {{#{anchor(path)}}}", ""]
        if summary:
            lines += [_cell(summary)[:1].upper() + _cell(summary)[1:] + ".", ""]
        if parser.description and len(path) > 1:
            lines += [_cell(parser.description), ""]
        usage = " ".join(parser.format_usage().removeprefix("usage: ").split())
        lines += ["```text", usage, "```", ""]
        subcommands = _subcommands(parser)
        if subcommands:
            lines += ["| subcommand | what it does |", "|---|---|"]
            for name, (_, help_text) in subcommands.items():
                lines.append(f"| [`{name}`](#{anchor((*path, name))}) | {_cell(help_text)} |")
            lines.append("")
        lines += _arguments_table(parser, globals_ if len(path) > 1 else set())
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    from kubesched.cli.main import build_parser

    return markdown.replace(MARKER, render(build_parser()))
