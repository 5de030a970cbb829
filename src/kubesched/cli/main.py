"""The ``kubesched`` command: thin argument handling over the library.

Subcommands: ``run`` (schedule a real cluster), ``simulate`` (schedule manifests in memory),
``explain`` (one pod, node by node, plugin by plugin: :mod:`kubesched.cli.explain`),
``config validate`` / ``config view``,
``plugins`` (what is registered, at which points), ``bench`` (scheduler_perf-style workloads) and
``audit verify`` / ``audit query`` (decision audit logs, :mod:`kubesched.cli.audit`),
``policy test`` (Rego unit tests, as ``opa test``: :mod:`kubesched.cli.policy_test`),
``agent`` (the cluster agent in front of one member: :mod:`kubesched.cli.agent`).
Every user error is one line on stderr and exit code 1; wrong usage exits 2 (argparse), except for
``policy test``, which keeps ``opa test``'s codes (2: a test failed; 1: any other error); no tracebacks.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import select
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import yaml

from kubesched.cli.agent import add_agent_command
from kubesched.cli.audit import add_audit_commands, add_simulate_arguments
from kubesched.cli.common import CONFIG_HELP, load_config, plugin_registry, positive_seconds, warn
from kubesched.cli.explain import add_explain_command, rfc3339_seconds
from kubesched.cli.policy_test import UsageExitParser, add_policy_test_command
from kubesched.errors import KubeschedError
from kubesched.progress import Progress

if TYPE_CHECKING:
    from kubesched.scheduler.results import AttemptObserver, AttemptRecord

log = logging.getLogger("kubesched")


class _SchedulingProgress:
    """An attempt observer for the progress line: ``scheduling: 3000/10000 pods attempted, 2990 scheduled``."""

    def __init__(self, progress: Progress, pending: int) -> None:
        from kubesched.scheduler.results import SCHEDULED  # lazily: building the parser imports nothing heavy

        self.scheduled_result = SCHEDULED
        self.progress = progress
        self.pending = pending
        self.attempted: set[str] = set()
        self.scheduled = 0

    def on_attempt(self, record: AttemptRecord) -> None:
        self.attempted.add(record.pod.uid)
        self.scheduled += record.result == self.scheduled_result
        if self.progress.due():
            self.progress.update(
                f"scheduling: {len(self.attempted)}/{self.pending} pods attempted, {self.scheduled} scheduled"
            )


def cmd_simulate(args: argparse.Namespace) -> int:
    from kubesched.api.manifests import load_manifests
    from kubesched.cli.audit import simulation_audit
    from kubesched.cli.report import report_json, report_table
    from kubesched.scheduler.results import ERROR, UNSCHEDULABLE
    from kubesched.simulation.run import simulate

    registry = plugin_registry()
    config = load_config(args.config, registry)
    # On a terminal, stderr says how far reading and scheduling are; the progress line is erased on exit,
    # before the report goes to stdout. No hook is installed when stderr is not a terminal.
    with Progress(sys.stderr) as progress:
        read: dict[str, int] = {}

        def on_object(source: str) -> None:
            read[source] = read.get(source, 0) + 1
            progress.count(f"reading {source}", read[source], None, "objects")

        manifests = load_manifests(args.filename, strict=args.strict, on_object=on_object if progress.enabled else None)
        progress.clear()
        warn(manifests.warnings)
        warn(config.warnings)
        if args.exit_code and not manifests.objects_read:
            # Most often a step before failed and wrote nothing (kubectl get without a cluster): a gate must not pass.
            raise KubeschedError("the input holds no objects: nothing was scheduled")
        history = None
        if args.output == "html":
            from kubesched.explain.run import AttemptHistory

            history = AttemptHistory()
        with simulation_audit(args) as audit_observers:
            observers: list[AttemptObserver] = [*audit_observers]
            if history is not None:
                observers.append(history)
            if progress.enabled:
                pending = sum(1 for pod in manifests.pods if not pod.spec.node_name)
                observers.append(_SchedulingProgress(progress, pending))
            report = simulate(
                manifests,
                config,
                registry,
                seed=args.seed,
                use_batch=not args.reference,
                max_attempts=args.max_attempts,
                observers=observers,
                start_time=args.time,
            )
    if report.ignored_pods:
        warn(
            [
                f"{len(report.ignored_pods)} pending pod(s) name no profile of this configuration; skipped: "
                + ", ".join(report.ignored_pods[:10])
                + (" ..." if len(report.ignored_pods) > 10 else "")
            ]
        )
    warn(report.warnings)
    preempted = report.preempted
    clusters = report.cluster_profiles
    if args.output == "json":
        json.dump(report_json(report.records, preempted, report.events, clusters), sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.output == "html":
        from kubesched.api.multicluster import CLUSTER_LABEL
        from kubesched.explain.html import report_html

        nodes = [node.metadata.name for node in manifests.nodes if CLUSTER_LABEL not in node.metadata.labels]
        members = [member.name for member in manifests.member_clusters]
        attempts = history.attempts if history is not None else None
        sys.stdout.write(report_html(report.records, config, nodes, preempted, attempts, members, clusters))
    else:
        print(report_table(report.records, clusters))
    # A SchedulingGated pod does not fail the gate: it was never offered to any node, so nothing says it would
    # not fit, and gates are held on purpose (a quota or an approval controller lifts them). "Do my workloads
    # still fit?" fails only on pods that were tried and fit nowhere (Unschedulable) or whose attempts failed (Error).
    if args.exit_code and any(record.result in (UNSCHEDULABLE, ERROR) for record in report.records):
        return 1
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    import asyncio

    from kubesched.backends.kube.kubeconfig import load_connection
    from kubesched.live.hub import HubOptions
    from kubesched.live.run import LiveOptions, LiveScheduler, install_signal_handlers

    registry = plugin_registry()
    config = load_config(args.config, registry)
    warn(config.warnings)
    connection = load_connection(
        args.kubeconfig or "", args.context or "", configured_kubeconfig=config.client_connection.kubeconfig
    )

    async def serve() -> None:
        from kubesched.cli.audit import open_audit_log

        # Opened before the scheduler starts: a bad key file or a damaged log stops it with a one-line error.
        sinks = (
            [open_audit_log(args.audit_log, args.audit_durability, args.audit_signing_key, args.audit_checkpoint_every)]
            if args.audit_log
            else []
        )
        from prometheus_client import REGISTRY, disable_created_metrics

        disable_created_metrics()  # type: ignore[no-untyped-call]  # as kube-scheduler: no <counter>_created
        options = LiveOptions(
            hub=HubOptions(refresh_interval=args.member_refresh_interval),
            audit_sinks=sinks,
            audit_events=args.audit_events,
            hostname=args.hostname,
            health_address=None if args.port == 0 else (args.bind_address, args.port),
            registry=REGISTRY,  # also holds the audit trail's counters
        )
        try:
            live = LiveScheduler(config, registry, connection, options)
        except BaseException:
            for sink in sinks:
                sink.close_unused()  # a plugin that cannot be built leaves no empty log behind
            raise
        stop = asyncio.Event()
        install_signal_handlers(stop)
        await live.run(stop)

    asyncio.run(serve())
    return 0


def cmd_config_validate(args: argparse.Namespace) -> int:
    from kubesched.simulation.run import build_every_plugin

    registry = plugin_registry()
    config = load_config(args.file, registry)
    warn(config.warnings)
    build_every_plugin(config, registry)
    profiles = ", ".join(p.scheduler_name for p in config.profiles)
    print(f"{args.file}: valid (profiles: {profiles})")
    return 0


def cmd_config_view(args: argparse.Namespace) -> int:
    from kubesched.config.loader import dump_config

    registry = plugin_registry()
    config = load_config(args.file, registry)
    print(yaml.safe_dump(dump_config(config), sort_keys=False), end="")
    return 0


def cmd_plugins(args: argparse.Namespace) -> int:
    registry = plugin_registry()
    rows = []
    for name in sorted(registry):
        entry = registry[name]
        points = ", ".join(sorted(entry.extension_points))
        state = "built" if entry.implemented else "not built yet"
        rows.append((name, state, points))
    if args.output == "json":
        json.dump(
            [{"name": n, "status": s, "extensionPoints": p.split(", ") if p else []} for n, s, p in rows],
            sys.stdout,
            indent=2,
        )
        sys.stdout.write("\n")
        return 0
    width = max(len(r[0]) for r in rows)
    state_width = max(len(r[1]) for r in rows)
    print(f"{'PLUGIN'.ljust(width)}  {'STATUS'.ljust(state_width)}  EXTENSION POINTS")
    for name, state, points in rows:
        print(f"{name.ljust(width)}  {state.ljust(state_width)}  {points}")
    return 0


def cmd_policy_batch_module(args: argparse.Namespace) -> int:
    from kubesched.policy.contract import batch_module

    sys.stdout.write(batch_module(args.decision_path.strip("/"), args.target_kind))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    if args.api:
        if args.compare:
            print("error: --compare works with the in-process bench, not with --api", file=sys.stderr)
            return 2
        from kubesched.bench.api import main as api_bench_main

        return api_bench_main(args)
    if args.workloads and args.all:
        print("error: name workloads or pass --all, not both", file=sys.stderr)
        return 2
    if not (args.workloads or args.all or args.list or args.workload_dir):
        # Every bundled shape at full size (thousands of nodes and pods each): never by accident. As `kubectl get`
        # without a resource type, say what to pass and where the choices are listed.
        print(
            "error: name the workloads to run (kubesched bench --list shows them, with their sizes), "
            "or pass --all to run every one at full size",
            file=sys.stderr,
        )
        return 2
    from kubesched.bench.runner import main as bench_main

    return bench_main(args)


def _whole_number(text: str, minimum: int, too_small: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{value} {too_small}")
    return value


def positive_int(text: str) -> int:
    return _whole_number(text, 1, "is not a positive number")


def non_negative_int(text: str) -> int:
    return _whole_number(text, 0, "is negative")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kubesched")
    except PackageNotFoundError:
        return "unknown (not installed)"


STRICT_HELP = (
    "refuse what kubectl apply --validate=strict would (unknown fields, duplicate keys, an unknown apiVersion, "
    "invalid names); without it they are warnings"
)
_GLOBAL_OPTIONS = ("verbose", "logging_format", "log_level")


def _accept_global_options_everywhere(parser: argparse.ArgumentParser) -> None:
    """Let ``-v``, ``--logging-format`` and ``--log-level`` also follow the subcommand (``kubesched simulate -v``),
    where the subcommand has no option of that name itself (``policy test -v`` is its own, as in ``opa test``).
    Their defaults stay the top-level parser's: a subcommand only sets what is given after it."""
    originals = [a for a in parser._actions if a.dest in _GLOBAL_OPTIONS]
    pending = [parser]
    while pending:
        current = pending.pop()
        for action in current._actions:
            if not isinstance(action, argparse._SubParsersAction):
                continue
            for sub in action.choices.values():
                taken = {flag for a in sub._actions for flag in a.option_strings}
                for original in originals:
                    flags = [f for f in original.option_strings if f not in taken]
                    if not flags:
                        continue
                    kwargs: dict[str, Any] = {"dest": original.dest, "help": original.help}
                    kwargs["default"] = argparse.SUPPRESS
                    if original.choices is not None:
                        kwargs["choices"] = original.choices
                    if original.nargs == 0:
                        sub.add_argument(*flags, action="store_true", **kwargs)
                    else:
                        sub.add_argument(*flags, **kwargs)
                pending.append(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubesched", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    parser.add_argument(
        "--logging-format", choices=("text", "json"), default="text", help="log lines as text or as JSON objects"
    )
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="warning",
        help="debug: also every pod's outcome (kube-scheduler's -v=2 lines); default warning",
    )
    parser.add_argument("--version", action="version", version=f"kubesched {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="schedule the pods of a real cluster, beside kube-scheduler")
    run.add_argument("--config", help=CONFIG_HELP)
    run.add_argument(
        "--kubeconfig", help="kubeconfig file (default: clientConnection.kubeconfig, then KUBECONFIG, then in-cluster)"
    )
    run.add_argument("--context", help="kubeconfig context (default: its current-context)")
    run.add_argument(
        "--hostname",
        help="this replica's name in its Lease identity and its events' reportingInstance (default: the host's)",
    )
    run.add_argument(
        "--bind-address", default="0.0.0.0", help="address of /metrics, /healthz and /readyz (default 0.0.0.0)"
    )
    run.add_argument(
        "--port", type=int, default=10259, help="port of /metrics, /healthz and /readyz, plain HTTP (0: none)"
    )
    add_simulate_arguments(run)
    run.add_argument("--audit-events", action="store_true", help="report every decision as a PolicyAudit event")
    run.add_argument(
        "--member-refresh-interval",
        type=positive_seconds,
        default=5.0,
        metavar="SECONDS",
        help="with cluster profiles: seconds between two state refreshes of a member cluster (default 5)",
    )
    run.set_defaults(func=cmd_run)

    simulate = commands.add_parser("simulate", help="schedule the pending pods of manifest files in memory")
    simulate.add_argument(
        "-f", "--filename", action="append", required=True, help="manifest file or directory; - reads standard input"
    )
    simulate.add_argument("--strict", action="store_true", help=STRICT_HELP)
    simulate.add_argument(
        "--exit-code",
        action="store_true",
        help="exit 1 when any pod ends Unschedulable or Error (a CI gate: do my workloads still fit?), or when the "
        "input holds no objects at all (an empty file or directory is a warning without it); SchedulingGated pods, "
        "never tried, do not count",
    )
    simulate.add_argument("--config", help=CONFIG_HELP)
    simulate.add_argument(
        "--output",
        "-o",
        choices=("table", "json", "html"),
        default="table",
        help="table; json; html: one self-contained page, per pod a node x plugin table (default table)",
    )
    simulate.add_argument("--seed", type=int, default=0, help="seed for random tie-breaking (default 0)")
    simulate.add_argument(
        "--time",
        type=rfc3339_seconds,
        metavar="RFC3339",
        help="the simulated clock's start, e.g. 2026-01-01T00:00:00Z (default: now)",
    )
    simulate.add_argument("--reference", action="store_true", help="use the per-node plugin path, not batch")
    simulate.add_argument(
        "--max-attempts",
        type=positive_int,
        default=10,
        help="stop retrying a pod after this many attempts (default 10)",
    )
    add_simulate_arguments(simulate)
    simulate.set_defaults(func=cmd_simulate)

    config = commands.add_parser("config", help="work with KubeSchedulerConfiguration files")
    config_commands = config.add_subparsers(dest="config_command", required=True)
    validate = config_commands.add_parser("validate", help="check a configuration; list every error")
    validate.add_argument("file", help=CONFIG_HELP.replace(" (default: kube-scheduler's defaults)", ""))
    validate.set_defaults(func=cmd_config_validate)
    view = config_commands.add_parser(
        "view", help="print the fully defaulted configuration, plugin args' file paths as they will be read"
    )
    view.add_argument("file", nargs="?", help=CONFIG_HELP)
    view.set_defaults(func=cmd_config_view)

    plugins = commands.add_parser("plugins", help="list registered plugins and their extension points")
    plugins.add_argument("--output", "-o", choices=("table", "json"), default="table")
    plugins.set_defaults(func=cmd_plugins)

    policy = commands.add_parser("policy", help="work with Rego policies")
    policy_commands = policy.add_subparsers(dest="policy_command", required=True, parser_class=UsageExitParser)
    add_policy_test_command(policy_commands)
    batch_module = policy_commands.add_parser(
        "batch-module",
        help="print the Rego module kubesched asks for one pod's decisions on many nodes, to ship in a bundle",
    )
    batch_module.add_argument(
        "--decision-path", default="kubernetes/authz", help="the decision document (default kubernetes/authz)"
    )
    batch_module.add_argument("--target-kind", choices=["node", "cluster"], default="node")
    batch_module.set_defaults(func=cmd_policy_batch_module)

    add_explain_command(commands)

    add_audit_commands(commands)

    add_agent_command(commands)

    bench = commands.add_parser(
        "bench",
        help="run scheduler_perf-style benchmark workloads",
        description="Run scheduler_perf-style workloads in this process and report pods/s, latency, CPU per pod "
        "and a check of the final placements. Name the workloads (bench --list shows them), or pass --all.",
    )
    bench.add_argument(
        "workloads",
        nargs="*",
        help="workload names (bundled, or in --workload-dir) or workload YAML files; none: --all or --workload-dir",
    )
    bench.add_argument(
        "--all",
        action="store_true",
        help="run every workload (of --workload-dir, else every bundled one, each at its full size)",
    )
    bench.add_argument(
        "--list",
        action="store_true",
        help="list the workloads (all, or those named) with their nodes, pods, params and what each measures; "
        "sizes are after --param",
    )
    bench.add_argument("--output", "-o", choices=("table", "json"), default="table")
    bench.add_argument(
        "--workload-dir",
        help="directory of workload YAML files (default: the workloads bundled with kubesched); "
        "alone, runs all of them",
    )
    bench.add_argument("--repeat", type=positive_int, default=1, help="runs per workload; medians are reported")
    bench.add_argument("--reference", action="store_true", help="use the per-node plugin path, not batch")
    bench.add_argument(
        "--compare",
        metavar="BASELINE.json",
        help="after the run, print pods/s, p50 and CPU-per-pod ratios against a previous `bench -o json` output",
    )
    bench.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=N",
        help="override a workload param, repeatable: it applies to the selected workloads that declare it, and a "
        "param none declares is an error. A smaller run of a shape, e.g. SchedulingBasic --param initNodes=10 "
        "--param initPods=100 --param measurePods=20 (nodes too small for the pods are refused before the run)",
    )
    api = bench.add_argument_group(
        "--api", "SchedulingBasic through a real kube-apiserver (KUBEBUILDER_ASSETS), kubesched vs kube-scheduler"
    )
    api.add_argument("--api", action="store_true", help="run both schedulers as processes against kube-apiserver")
    api.add_argument("--nodes", type=positive_int, default=5000, help="nodes (default 5000)")
    api.add_argument("--init-pods", type=non_negative_int, default=1000, help="pods bound at creation (default 1000)")
    api.add_argument("--pods", type=positive_int, default=10000, help="measured pending pods (default 10000)")
    api.add_argument("--qps", type=float, default=5000.0, help="clientConnection.qps of both (default 5000)")
    api.add_argument("--burst", type=positive_int, default=5000, help="clientConnection.burst of both (default 5000)")
    api.add_argument("--peer", help="kube-scheduler binary (default: $KUBEBUILDER_ASSETS/kube-scheduler)")
    api.add_argument("--skip-peer", action="store_true", help="run kubesched only")
    api.add_argument(
        "--stall-timeout", type=float, default=60.0, help="stop a run that binds nothing for this long (default 60 s)"
    )
    api.add_argument("--workdir", help="keep control planes, configs and logs here (default: a temporary directory)")
    api.add_argument("--cprofile", help="run the last kubesched process under cProfile, writing this file")
    api.add_argument("--py-spy", help="sample the last kubesched process with py-spy (collapsed stacks) to this file")
    bench.set_defaults(func=cmd_bench)
    _accept_global_options_everywhere(parser)
    return parser


SIGPIPE_EXIT = 141  # 128 + SIGPIPE


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. When the reader of its output goes away (``kubesched plugins | head -1``), the command
    stops quietly with exit code 141, what a shell reports for git, kubectl or coreutils ended by SIGPIPE (so
    ``set -o pipefail`` scripts see the same as with them); Python ignores SIGPIPE and raises instead."""
    try:
        try:
            return _run(argv)
        finally:
            # Output still buffered meets the closed pipe here, not at interpreter exit.
            sys.stdout.flush()
    except BrokenPipeError:
        gone = _closed_output_streams()
        if not gone:
            raise  # a pipe or socket of the command's own work, not its output: a bug to report
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in gone:
            os.dup2(devnull, fd)  # what is left in the buffers is written nowhere at exit
        os.close(devnull)
        return SIGPIPE_EXIT


def _closed_output_streams() -> list[int]:
    """stdout and stderr descriptors that are pipes whose reader has gone (poll reports an error on them)."""
    gone = []
    for fd in (1, 2):
        poller = select.poll()
        try:
            poller.register(fd, select.POLLOUT)
            events = poller.poll(0)
        except (OSError, ValueError):
            continue
        if any(mask & select.POLLERR for _, mask in events):
            gone.append(fd)
    return gone


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # What parse_args does, but reported by the subcommand's parser when it asks to be (its usage line, and
        # for policy test its exit code): argparse leaves arguments nobody knows to the top-level parser.
        reporter: argparse.ArgumentParser = getattr(args, "usage_parser", parser)
        reporter.error(f"unrecognized arguments: {' '.join(unknown)}")
    from kubesched.cli.logs import configure
    from kubesched.heap import tune_collector

    tune_collector()
    configure(
        logging.DEBUG if args.verbose else logging.getLevelNamesMapping()[args.log_level.upper()], args.logging_format
    )
    try:
        code: int = args.func(args)
        return code
    except KubeschedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
