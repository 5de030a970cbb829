"""``kubesched audit verify|query`` and the ``simulate --audit-log`` wiring: thin layers over kubesched.audit.

Registered by :func:`kubesched.cli.main.build_parser`; ``cmd_simulate`` opens the audit log through
:func:`simulation_audit`. Errors are :class:`~kubesched.errors.KubeschedError` values, printed by ``main``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from kubesched.errors import KubeschedError

if TYPE_CHECKING:
    from kubesched.scheduler.results import AttemptObserver

OUTPUTS = ("text", "table", "json")
# kubesched.audit.sinks.jsonl.DURABILITIES, spelled out so that building the parser imports nothing heavy
# (a test holds the two equal).
DURABILITIES = ("every", "batch", "never")


def add_audit_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    audit = commands.add_parser("audit", help="verify and query decision audit logs")
    audit_commands = audit.add_subparsers(dest="audit_command", required=True)

    verify = audit_commands.add_parser(
        "verify", help="check a hash-chained audit log; exit 1 naming the first altered, removed or moved record"
    )
    verify.add_argument("file")
    verify.set_defaults(func=cmd_audit_verify)

    query = audit_commands.add_parser("query", help="show the decisions matching every filter, and why")
    query.add_argument("file")
    query.add_argument("--pod", help="namespace/name (a bare name means namespace default)")
    query.add_argument("--node", help="decisions that chose this node or cluster, or whose policy verdicts name it")
    query.add_argument("--since", help="RFC 3339 time, or a duration before now such as 10m or 1h30m")
    query.add_argument(
        "--verdict",
        choices=("allow", "deny", "error", "exempt"),
        help="the policy's verdict (error: the engine could not decide; exempt: the pod was not evaluated)",
    )
    query.add_argument(
        "--output", "-o", choices=OUTPUTS, default="text", help="text: an explanation per decision (default)"
    )
    query.set_defaults(func=cmd_audit_query)


def add_simulate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--audit-log", metavar="FILE", help="append a hash-chained audit record per attempt to FILE")
    parser.add_argument(
        "--audit-durability",
        choices=DURABILITIES,
        default="every",
        help="fsync the audit log after every record (default), every 100 records, or never",
    )


def cmd_audit_verify(args: argparse.Namespace) -> int:
    from kubesched.audit.verify import verify_chain

    result = verify_chain(args.file)
    print(result.describe())
    if result.ok and not result.anchored and result.records:
        print(
            f"warning: {args.file} has no head file: records removed from its end cannot be detected",
            file=sys.stderr,
        )
    return 0 if result.ok else 1


def cmd_audit_query(args: argparse.Namespace) -> int:
    from kubesched.audit.query import Query, explain, parse_pod, parse_since, run_query, table
    from kubesched.clock import RealClock

    query = Query(
        pod=parse_pod(args.pod) if args.pod else None,
        node=args.node,
        since=parse_since(args.since, RealClock().now()) if args.since else None,
        verdict=args.verdict,
    )
    records = run_query(args.file, query)
    if args.output == "json":
        json.dump({"records": [record.to_json() for record in records]}, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    elif args.output == "table":
        print(table(records))
    else:
        print("\n\n".join(explain(record) for record in records) if records else "no matching decisions")
    return 0


@contextlib.contextmanager
def simulation_audit(path: str | None, durability: str, seed: int | None) -> Iterator[list[AttemptObserver]]:
    """The observers ``simulate`` adds for ``--audit-log``: none without it; the log is closed on exit."""
    if path is None:
        yield []
        return
    from kubesched.audit.builder import AuditObserver, random_ids, seeded_ids
    from kubesched.audit.sinks.jsonl import JsonlSink

    with JsonlSink(path, durability=durability) as sink:
        # A seeded run is reproducible, ids included; salting with the log's head keeps the ids of runs
        # appended to the same log apart.
        ids = seeded_ids(seed, sink.opened_at_head) if seed is not None else random_ids()
        observer = AuditObserver(sink, ids=ids)
        yield [observer]
    # The sink is closed, so its writer is done: it counts what it lost after write returned, the
    # observer what write refused.
    lost = observer.write_errors + sink.dropped
    if lost:
        raise KubeschedError(f"{path}: {lost} audit record(s) could not be written (see the log)")
    print(f"audit: {observer.records} record(s) appended to {path}", file=sys.stderr)
