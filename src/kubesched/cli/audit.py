"""``kubesched audit verify|query|keygen`` and the ``--audit-*`` options of ``simulate``/``run``: thin layers
over kubesched.audit.

Registered by :func:`kubesched.cli.main.build_parser`; ``cmd_simulate`` opens the audit log through
:func:`simulation_audit`, ``cmd_run`` through :func:`open_audit_log`. Errors are
:class:`~kubesched.errors.KubeschedError` values, printed by ``main`` as one line. ``audit verify`` exits 0
when the log verifies (warnings, such as unanchored records, go to stderr) and 1 when it does not.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from kubesched.errors import KubeschedError
from kubesched.terminal_text import safe_lines

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from kubesched.audit.sinks.jsonl import JsonlSink
    from kubesched.audit.verify import VerifyResult
    from kubesched.scheduler.results import AttemptObserver

OUTPUTS = ("text", "table", "json")
# kubesched.audit.sinks.jsonl.DURABILITIES, spelled out so that building the parser imports nothing heavy
# (a test holds the two equal).
DURABILITIES = ("every", "batch", "never")
# kubesched.audit.checkpoints.DEFAULT_EVERY, for the same reason (the same test holds them equal).
CHECKPOINT_EVERY = 1000


def _count(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is less than {minimum}")
        return value

    return parse


def add_audit_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    audit = commands.add_parser("audit", help="verify and query decision audit logs")
    audit_commands = audit.add_subparsers(dest="audit_command", required=True)

    verify = audit_commands.add_parser(
        "verify", help="check a hash-chained audit log; exit 1 naming the first altered, removed or moved record"
    )
    verify.add_argument("file")
    verify.add_argument(
        "--public-key",
        metavar="FILE",
        action="append",
        help="check the signed checkpoints (<file>.checkpoints) with this Ed25519 public key (repeat it for the "
        "old and new keys of a rotation)",
    )
    verify.add_argument(
        "--expect-head",
        metavar="HASH",
        help="fail unless the chain ends at this hash (a head kept where the log's writer cannot reach it)",
    )
    verify.add_argument(
        "--max-unanchored",
        type=_count(0),
        metavar="N",
        help="fail when more than N records follow the last checkpoint (0 for a log that was closed cleanly)",
    )
    verify.add_argument("--output", "-o", choices=("text", "json"), default="text")
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
    query.add_argument(
        "--public-key", metavar="FILE", action="append", help="check the log's signed checkpoints too (as audit verify)"
    )
    query.add_argument(
        "--no-verify", action="store_true", help="answer without verifying the log first (a large log is read once)"
    )
    query.set_defaults(func=cmd_audit_query)

    keygen = audit_commands.add_parser(
        "keygen", help="make an Ed25519 key pair for --audit-signing-key and audit verify --public-key"
    )
    keygen.add_argument("--private", required=True, metavar="FILE", help="the signing key to create (mode 0600)")
    keygen.add_argument("--public", required=True, metavar="FILE", help="the public key to create")
    keygen.set_defaults(func=cmd_audit_keygen)


def add_simulate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--audit-log", metavar="FILE", help="append a hash-chained audit record per attempt to FILE")
    parser.add_argument(
        "--audit-durability",
        choices=DURABILITIES,
        default="every",
        help="fsync the audit log after every record (default), every 100 records, or never",
    )
    parser.add_argument(
        "--audit-signing-key",
        metavar="FILE",
        help="Ed25519 private key (PEM or raw; a mounted Secret): sign checkpoints into <audit-log>.checkpoints",
    )
    parser.add_argument(
        "--audit-checkpoint-every",
        type=_count(1),
        metavar="N",
        help=f"sign a checkpoint after every N records and at close (default {CHECKPOINT_EVERY})",
    )


def cmd_audit_verify(args: argparse.Namespace) -> int:
    result = _verify(args.file, args.public_key, expect_head=args.expect_head, max_unanchored=args.max_unanchored)
    if args.output == "json":
        json.dump(result.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print("\n".join(result.report()))
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0 if result.ok else 1


def _verify(
    path: str,
    public_key_files: list[str] | None,
    *,
    expect_head: str | None = None,
    max_unanchored: int | None = None,
) -> VerifyResult:
    from kubesched.audit.chain import is_hash
    from kubesched.audit.verify import verify_chain

    if expect_head is not None:
        expect_head = expect_head.strip().lower()
        if not is_hash(expect_head):
            raise KubeschedError(f"--expect-head {expect_head!r}: expected a sha256 hash, 64 hex digits")
    if max_unanchored is not None and not public_key_files and expect_head is None:
        raise KubeschedError("--max-unanchored needs --public-key (or --expect-head): nothing else anchors records")
    public_keys: list[Ed25519PublicKey] | None = None
    if public_key_files:
        from kubesched.audit.keys import load_public_key

        public_keys = [load_public_key(file) for file in public_key_files]
    return verify_chain(path, public_key=public_keys, expect_head=expect_head, max_unanchored=max_unanchored)


def cmd_audit_query(args: argparse.Namespace) -> int:
    from kubesched.audit.query import Query, explain, parse_pod, parse_since, run_query, table
    from kubesched.clock import RealClock

    query = Query(
        pod=parse_pod(args.pod) if args.pod else None,
        node=args.node,
        since=parse_since(args.since, RealClock().now()) if args.since else None,
        verdict=args.verdict,
    )
    verified = None if args.no_verify else _verify(args.file, args.public_key)
    skipped: list[tuple[int, str]] = []
    for warning in verified.warnings if verified is not None else ():
        print(f"warning: {warning}", file=sys.stderr)
    if verified is not None and not verified.ok:
        print(
            f"warning: the log does not verify ({verified.describe()}); the answers below may come from altered, "
            "moved or forged records",
            file=sys.stderr,
        )
        # The verdict is out already: answer from the lines that are still records rather than stop at the first.
        records = run_query(args.file, query, skip=lambda number, why: skipped.append((number, why)))
    else:
        records = run_query(args.file, query)
    if skipped:
        print(
            f"warning: skipped {len(skipped)} line(s) that are not audit records (the first: line {skipped[0][0]}, "
            f"{skipped[0][1]})",
            file=sys.stderr,
        )
    if args.output == "json":
        answer: dict[str, object] = {"records": [record.to_json() for record in records]}
        if verified is not None:
            answer["verification"] = verified.to_json()
        json.dump(answer, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    elif args.output == "table":
        print(safe_lines(table(records)))
    else:
        print(safe_lines("\n\n".join(explain(record) for record in records)) if records else "no matching decisions")
    return 0


def cmd_audit_keygen(args: argparse.Namespace) -> int:
    from kubesched.audit.keys import key_id, write_key_pair

    key = write_key_pair(args.private, args.public)
    print(f"key {key_id(key.public_key())}: signing key {args.private} (keep it secret), public key {args.public}")
    return 0


def open_audit_log(path: str, durability: str, signing_key_file: str | None, checkpoint_every: int | None) -> JsonlSink:
    """The JSON-lines sink of ``--audit-log`` and its options; KubeschedError for a bad key file."""
    from kubesched.audit.sinks.jsonl import JsonlSink

    if signing_key_file is None:
        if checkpoint_every is not None:
            raise KubeschedError("--audit-checkpoint-every needs --audit-signing-key: nothing signs checkpoints")
        return JsonlSink(path, durability=durability)
    from kubesched.audit.keys import load_signing_key

    key = load_signing_key(signing_key_file)
    return JsonlSink(
        path,
        durability=durability,
        signing_key=key,
        checkpoint_every=checkpoint_every if checkpoint_every is not None else CHECKPOINT_EVERY,
    )


@contextlib.contextmanager
def simulation_audit(args: argparse.Namespace) -> Iterator[list[AttemptObserver]]:
    """The observers ``simulate`` adds for ``--audit-log``: none without it; the log is closed on exit."""
    path: str | None = args.audit_log
    seed: int | None = args.seed
    if path is None:
        if args.audit_signing_key is not None:
            raise KubeschedError("--audit-signing-key needs --audit-log: there is no log to sign")
        yield []
        return
    from kubesched.audit.builder import AuditObserver, random_ids, seeded_ids

    sink = open_audit_log(path, args.audit_durability, args.audit_signing_key, args.audit_checkpoint_every)
    try:
        # A seeded run is reproducible, ids included; salting with the log's head keeps the ids of runs
        # appended to the same log apart.
        ids = seeded_ids(seed, sink.opened_at_head) if seed is not None else random_ids()
        observer = AuditObserver(sink, ids=ids)
        yield [observer]
    except BaseException:
        sink.close_unused()  # a run that failed before its first decision leaves no empty log
        raise
    sink.close_sync()
    # The sink is closed, so its writer is done: it counts what it lost after write returned, the
    # observer what write refused.
    lost = observer.write_errors + sink.dropped
    if lost:
        raise KubeschedError(f"{path}: {lost} audit record(s) could not be written (see the log)")
    print(f"audit: {observer.records} record(s) appended to {path}", file=sys.stderr)
