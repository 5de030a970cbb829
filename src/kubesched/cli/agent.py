"""``kubesched agent``: serve one member cluster to the hub (state, reservations, bind) over HTTPS.

Thin argument handling over :mod:`kubesched.agent`; runs until SIGTERM or SIGINT. Errors before serving (a
bad kubeconfig, an unreadable token, certificate or key file, a bad ``--listen``) are one line and exit code 1.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path

from kubesched.cli.common import positive_seconds
from kubesched.errors import KubeschedError

log = logging.getLogger("kubesched")


class AgentUsageError(KubeschedError):
    """A flag of ``kubesched agent`` that cannot be used."""


class AgentStartupError(KubeschedError):
    """The agent could not start serving (the member's API server refused or did not answer)."""


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) -> (host, port)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise AgentUsageError(f"--listen {value!r}: must be HOST:PORT with a port in 0..65535")
    host = host.removeprefix("[").removesuffix("]") or "0.0.0.0"
    return host, int(port)


def _check_readable(flag: str, path: str) -> None:
    """A file a flag names must open: otherwise one line naming the flag, the path and why."""
    try:
        with open(path, "rb"):
            pass
    except OSError as error:
        raise AgentUsageError(f"{flag} {path}: {error.strerror or error}") from None


def add_agent_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    agent = commands.add_parser("agent", help="serve one member cluster to the hub over HTTPS (the cluster agent)")
    agent.add_argument(
        "--kubeconfig", default="", help="kubeconfig of the member cluster (default: KUBECONFIG, then in-cluster)"
    )
    agent.add_argument("--context", default="", help="kubeconfig context (default: its current-context)")
    agent.add_argument("--listen", required=True, metavar="HOST:PORT", help="address to serve on")
    agent.add_argument("--token-file", required=True, help="file holding the bearer token the hub must present")
    agent.add_argument("--tls-cert", required=True, help="serving certificate (PEM)")
    agent.add_argument("--tls-key", required=True, help="its private key (PEM)")
    agent.add_argument(
        "--namespace", default="kubesched-system", help="where reservations are stored (default kubesched-system)"
    )
    agent.add_argument("--cluster-name", default="", help="the member's name as reported in state (informational)")
    agent.add_argument(
        "--sweep-interval", type=float, default=5.0, help="seconds between expired-reservation sweeps (default 5)"
    )
    agent.add_argument(
        "--request-timeout",
        type=positive_seconds,
        default=10.0,
        help="seconds each call to the member's API server may take; a pod create is also told to give up then "
        "(default 10)",
    )
    agent.add_argument(
        "--in-flight-seconds",
        type=positive_seconds,
        default=None,
        help="seconds a pod create with no answer (or one a killed predecessor may have sent) may still take effect "
        "in the member; releases answer Settling until then (default: --request-timeout + 5)",
    )
    agent.set_defaults(func=cmd_agent)


def cmd_agent(args: argparse.Namespace) -> int:
    from kubesched.agent.core import Agent
    from kubesched.agent.server import AgentServer, server_ssl_context
    from kubesched.backends.kube.client import KubeClient
    from kubesched.backends.kube.errors import KubeApiError, KubeTransportError
    from kubesched.backends.kube.kubeconfig import load_connection
    from kubesched.clock import RealClock
    from kubesched.live.run import install_signal_handlers
    from kubesched.net.tls import TlsError
    from kubesched.net.token_file import TokenFileError, read_token_file

    host, port = parse_listen(args.listen)
    for flag, path in (("--token-file", args.token_file), ("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key)):
        _check_readable(flag, path)
    try:
        token = read_token_file(args.token_file, "--token-file")
        context = server_ssl_context(Path(args.tls_cert), Path(args.tls_key))
    except (TokenFileError, TlsError) as error:
        raise AgentUsageError(str(error)) from None
    connection = load_connection(args.kubeconfig, args.context)

    async def serve() -> None:
        stop = asyncio.Event()
        install_signal_handlers(stop)
        client = KubeClient(connection, user_agent="kubesched-agent", timeout=args.request_timeout)
        try:
            agent = Agent(
                client,
                clock=RealClock(),
                namespace=args.namespace,
                cluster_name=args.cluster_name,
                request_timeout=args.request_timeout,
                in_flight_seconds=args.in_flight_seconds,
            )
            server = AgentServer(
                agent, token=token, ssl_context=context, host=host, port=port, sweep_interval=args.sweep_interval
            )
            async with server:
                print(f"serving on {server.url}", flush=True)
                await stop.wait()
        finally:
            await client.aclose()

    try:
        asyncio.run(serve())
    except (KubeApiError, KubeTransportError) as error:  # the member's API at start-up (its namespace)
        raise AgentStartupError(f"the member's API server ({connection.server}): {error}") from error
    return 0
