"""``kubesched explain``: why one pod of a simulation went where it went (a thin layer over kubesched.explain).

A command of its own rather than a ``simulate`` flag: it answers about one pod and has its own outputs
(per-node, per-plugin tables; the ``kubesched.io/explain/v1`` JSON document), while ``simulate -o``
reports the whole run. Registered by :func:`kubesched.cli.main.build_parser`; errors are
:class:`~kubesched.errors.KubeschedError` values, printed by ``main``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from kubesched.cli.common import CONFIG_HELP


def rfc3339_seconds(text: str) -> float:
    """An RFC 3339 timestamp with a zone, as seconds since the epoch (argparse reports the error)."""
    from kubesched.audit.records import parse_rfc3339

    try:
        return parse_rfc3339(text).timestamp()
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_explain_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    explain = commands.add_parser(
        "explain", help="simulate the manifests and show, for one pod, every node's Filter and Score verdicts"
    )
    explain.add_argument("pod", metavar="POD", help="namespace/name, or a name that only one namespace has")
    explain.add_argument("-f", "--filename", action="append", required=True, help="manifest file or directory")
    explain.add_argument(
        "--strict", action="store_true", help="refuse what kubectl apply --validate=strict would (else warnings)"
    )
    explain.add_argument("--config", help=CONFIG_HELP)
    explain.add_argument("--output", "-o", choices=("table", "json"), default="table")
    explain.add_argument("--seed", type=int, default=0, help="seed for random tie-breaking (default 0)")
    explain.add_argument("--reference", action="store_true", help="use the per-node plugin path, not batch")
    explain.add_argument(
        "--time",
        type=rfc3339_seconds,
        metavar="RFC3339",
        help="the simulated clock's start, e.g. 2026-01-01T00:00:00Z (default: now), as for simulate",
    )
    explain.set_defaults(func=cmd_explain)


def use_colour() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def cmd_explain(args: argparse.Namespace) -> int:
    from kubesched.api.manifests import load_manifests
    from kubesched.cli.common import load_config, plugin_registry, warn
    from kubesched.explain.render import explanation_json, explanation_text
    from kubesched.explain.run import explain

    plugins = plugin_registry()
    config = load_config(args.config, plugins)
    manifests = load_manifests(args.filename, strict=args.strict)
    warn(manifests.warnings)
    warn(config.warnings)
    explanation = explain(
        manifests, config, plugins, args.pod, seed=args.seed, use_batch=not args.reference, start_time=args.time
    )
    if args.output == "json":
        json.dump(explanation_json(explanation), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(explanation_text(explanation, colour=use_colour()))
    return 0
